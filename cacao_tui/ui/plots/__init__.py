"""Pictures in the app, drawn with plotext (MIT, pure Python): the per-branch best-time history,
per-case bars and the roofline. ``plot_view.PlotView`` is the widget; the other modules turn
results into series and draw them."""
