"""scripts/vmm-bench's parts: the run's set-up (context), one module per
section (irq, virtio with exit_costs, multiqueue, dispatch, footprint,
blkfio), the vbench runs they share (vbench), figures and processes
(figures, proc), and the outputs (results, report, charts)."""
