"""The user's own frame is the site; a standard-library or package frame only when no user frame calls it
(issue 56 item 3: a sync named at CPython's ``multiprocessing/queues.py:122`` ahead of the user's line)."""

from __future__ import annotations

import copy
import inspect
import os
import sys
import threading
from typing import Any

from perfsuite.probes.sites import Sites

SITES = Sites()


class Caught:
    """Asks for the site while ``copy.deepcopy`` (a standard-library frame) copies it, as a probe asks during
    an op; notes that frame's file and line too."""

    found: list[tuple[str, bool, str, int]] = []

    def __deepcopy__(self, memo: dict[int, Any]) -> Caught:
        frame = sys._getframe(1)
        self.found.append((*SITES.find(frame), frame.f_code.co_filename, frame.f_lineno))
        return self


def test_a_library_frame_called_from_the_users_line_names_the_users_line() -> None:
    Caught.found = []
    line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
    copy.deepcopy(Caught())  # the line named
    ((site, direct, library_file, _),) = Caught.found
    assert library_file == copy.__file__  # the walk starts in the standard library
    assert site == f"tests{os.sep}unit{os.sep}test_sites_user_first.py:{line}"
    assert direct is False  # issued through the library's code, not by the line itself


def test_with_no_user_frame_further_out_the_library_frame_is_the_site() -> None:
    Caught.found = []
    thread = threading.Thread(target=copy.deepcopy, args=(Caught(),))  # a queue's feeder thread, in kind
    thread.start()
    thread.join()
    ((site, _, _, library_line),) = Caught.found
    assert site == f"copy.py:{library_line}"  # named from its package on (perfsuite.core.source_paths)
