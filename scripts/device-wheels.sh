#!/usr/bin/env bash
# Download into .whl/ the Python wheels the GPU machine lacks (Python 3.12, x86-64, no network
# there), at the versions this checkout's virtualenv has, for scripts/gpu-check.sh and the
# other device scripts, which install .whl/*.whl into /tmp/site. Run from the repository root
# with the project's virtualenv active:
#
#   scripts/device-wheels.sh            # then carry .whl (it is git-ignored)
#
# The GPU image already holds numpy, pyyaml, cuda-python, torch, pytest, hypothesis, scikit-learn,
# nvidia-ml-py, httpx and friends; the list below is what it lacks (pydantic, textual and the
# LLM SDKs that cacao_tui imports, tree-sitter for the editor's modules, Kernel Tuner for the
# peer benchmark).
set -euo pipefail
cd "$(dirname "$0")/.."
names=(
  textual rich pydantic pydantic_core annotated-types typing-inspection typing_extensions
  anthropic openai google-genai jiter distro docstring_parser sniffio httpx2 httpcore2 tenacity
  websockets google-auth pyasn1 pyasn1_modules python-dotenv google-re2 plotext
  tree-sitter tree-sitter-c tree-sitter-cpp tree-sitter-python tree-sitter-yaml
  platformdirs mdit-py-plugins linkify-it-py uc-micro-py markdown-it-py pytest-asyncio
)
extra=(kernel_tuner python-constraint2 xmltodict)
freeze=$(python -m pip freeze 2>/dev/null)
pins=()
for n in "${names[@]}"; do
  norm=$(echo "$n" | tr '_' '-' | tr 'A-Z' 'a-z')
  line=$(echo "$freeze" | awk -F'==' -v n="$norm" '{k=tolower($1); gsub("_","-",k); if (k==n) print}')
  if [ -n "$line" ]; then pins+=("$line"); else pins+=("$n"); fi
done
pins+=("kernel_tuner==1.5.0" python-constraint2 xmltodict)
mkdir -p .whl
plat=()
for p in manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64 manylinux_2_24_x86_64 \
         manylinux_2_27_x86_64 manylinux_2_28_x86_64 manylinux_2_31_x86_64 manylinux_2_34_x86_64; do
  plat+=(--platform "$p")
done
python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${plat[@]}" -d .whl "${pins[@]}"
du -sh .whl
ls .whl | wc -l
