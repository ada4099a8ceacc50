"""A script that ends without ``app.close()``: the process exits quietly, and its jobs are kept.

The App closes its backends at interpreter exit (see ``duly.portal``); without that, the
portal's loop was dropped with the backends' tasks pending: psycopg_pool printed "Task was
destroyed but it is pending!" three times, redis-py a ResourceWarning per connection.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable

import duly

_SCRIPT = textwrap.dedent(
    """
    import sys

    import duly

    app = duly.App(sys.argv[1], namespace=sys.argv[2])


    @app.task
    def add(a: int, b: int) -> int:
        return a + b


    job = add.enqueue(1, 2)
    # A call through the portal's loop: the backend's async pool is open there.
    assert app.get_job(job.id) is not None
    print(job.id)
    # no app.close()
    """
)


def test_a_script_that_forgets_close_exits_without_warnings(
    url_and_namespace: tuple[str, str], make_app: Callable[..., duly.App]
) -> None:
    url, namespace = url_and_namespace
    # ResourceWarnings are hidden by default; an unclosed connection is one.
    command = [sys.executable, "-W", "default::ResourceWarning", "-c", _SCRIPT, url, namespace]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stderr) == (0, "")
    info = make_app().get_job(proc.stdout.strip())
    assert info is not None and info.status == "queued"
