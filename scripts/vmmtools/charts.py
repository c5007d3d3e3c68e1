"""matplotlib for the SVG charts of vmm-bench and vmm-ci: whether it is
there (and why not), pyplot set up for SVG, and the pieces both tools'
bar charts use."""
import os
import subprocess
import sys

SYSTEM_PYTHON = "/usr/bin/python3"
MISSING = ("matplotlib is not importable (Debian package python3-matplotlib; "
           "scripts/install-deps.sh installs it)")


def missing():
    """Why no chart can be drawn here, or ""."""
    try:
        import matplotlib  # noqa: F401
        return ""
    except ImportError:
        return MISSING


def reexec_with_matplotlib(script, env_flag):
    """Debian's python3-matplotlib lives in the system Python: when this
    interpreter (e.g. a pyenv shim) lacks it and that one has it, exec
    script there (once: env_flag marks the second start). Returns only
    when no exec happened."""
    if not missing() or os.environ.get(env_flag) or not os.access(SYSTEM_PYTHON, os.X_OK) \
            or os.path.realpath(sys.executable) == os.path.realpath(SYSTEM_PYTHON):
        return
    if subprocess.run([SYSTEM_PYTHON, "-c", "import matplotlib"],
                      capture_output=True).returncode == 0:
        os.environ[env_flag] = "1"
        os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON, os.path.abspath(script)] + sys.argv[1:])


def pyplot(backend, rc=None):
    """matplotlib.pyplot on backend (both write SVG files; the backend's
    text measurement places the layout), with rc set in its rcParams."""
    import matplotlib
    matplotlib.use(backend)
    matplotlib.rcParams.update(rc or {})
    import matplotlib.pyplot as plt
    return plt


def save(plt, fig, path, host=None):
    """Writes the figure; `host` (where the figures were measured: the KVM
    kind, e.g. an emulated host's QEMU and kernel) is its caption, so no
    chart passes for another host's."""
    if host:
        fig.text(0.005, 0.005, f"measured on: {host}", fontsize=7, ha="left", va="bottom",
                 color="dimgray")
        fig.tight_layout(rect=(0, 0.04, 1, 1))
    else:
        fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def bar_offset(i, n, width):
    """Where the i-th of n bars side by side sits from its group's centre."""
    return (i - (n - 1) / 2) * width


def label_bars(ax, bars, labels, fontsize):
    """Each bar's label just above it."""
    for bar, text in zip(bars, labels):
        if text:
            ax.annotate(text, (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                        ha="center", va="bottom", fontsize=fontsize)
