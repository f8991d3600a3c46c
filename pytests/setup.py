# SPDX-License-Identifier: MIT
"""The package's version is simfabric's one version, SF_VERSION in sim/core/version.h
(the rest of the package is in pyproject.toml)."""
import os
import re

from setuptools import setup

HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sim", "core",
                      "version.h")
with open(HEADER) as f:
    setup(version=re.search(r'#define SF_VERSION "([^"]+)"', f.read()).group(1))
