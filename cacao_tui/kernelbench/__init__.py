"""KernelBench's problems in: ``cacao import`` turns a PyTorch module in KernelBench's form
(``class Model(nn.Module)``, ``get_inputs()``, ``get_init_inputs()``) into a problem directory.
docs/KERNELBENCH.md tells how; fast_p, the field's score, is in cacao_tui.suite.fast_p."""
