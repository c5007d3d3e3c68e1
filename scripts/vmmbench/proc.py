"""Running a program with a time limit, and the end of what it printed."""
import subprocess


def run(cmd, timeout, **kw):
    """(exit code or None, stdout, stderr); None when it timed out or
    could not start (stderr then says which)."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
        return r.returncode, r.stdout, r.stderr
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        return None, out, err + f"\n(timed out after {timeout} s)"
    except OSError as e:
        return None, "", str(e)


def tail(text, n=15):
    lines = (text or "").strip().splitlines()
    return "\n".join(lines[-n:])
