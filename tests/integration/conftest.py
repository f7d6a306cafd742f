# SPDX-License-Identifier: MIT
"""Fixtures every integration test file may ask for by name (pytest finds
them here); the plain helpers they use are in helpers.py.

  rundir  a fresh, empty run directory (a short path), removed afterwards;
          skips the test if build/shortcut is not built
  env     an environment for programs under test: os.environ without
          SHORTCUT_* and LD_PRELOAD, SHORTCUT_RUNDIR the test's rundir,
          PYTHONUNBUFFERED=1

A test file may define a fixture of the same name; its own wins there."""
import os
import shutil

import pytest

from helpers import clean_env, need_built, short_tempdir


@pytest.fixture
def rundir(tmp_path):
    """A fresh run directory per test: tmp_path/run (kept for a look after
    a failure, as pytest keeps tmp_path), or, where that path is too long
    for a Unix socket's name in it, one in a short temporary directory."""
    need_built()
    d = str(tmp_path / "run")
    if len(d) < 70:
        os.mkdir(d, 0o700)
        yield d
        return
    top = short_tempdir()
    os.mkdir(os.path.join(top, "run"), 0o700)
    yield os.path.join(top, "run")
    shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def env(rundir):
    """os.environ for programs under test, with the test's run directory."""
    return clean_env(rundir, unbuffered=True)
