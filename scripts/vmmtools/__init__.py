"""What scripts/vmm-bench and scripts/vmm-ci share: the host's facts
(host.py), results.json and markdown tables (report.py), and the matplotlib
SVG charts (charts.py)."""
