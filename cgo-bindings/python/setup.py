"""The wheel's tag. pyproject.toml holds the metadata; this file only tags
the wheel for what it contains (docs/adr/0030-python-wheel-with-libsimba.md).

scripts/wheel.sh copies libsimba.so into simba/ before the build. A wheel
that carries it holds native code and is tagged py3-none-<platform>
(py3-none-linux_x86_64 on Debian amd64): any Python 3 of that platform loads
the library through ctypes, so neither the interpreter nor its ABI matter,
but the machine does. Without the library the wheel is pure Python
(py3-none-any) and needs SIMBA_LIBRARY or a system copy at run time."""

import os

from setuptools import Distribution, setup

try:
    from setuptools.command.bdist_wheel import bdist_wheel  # setuptools 70.1 and later
except ImportError:
    try:
        from wheel.bdist_wheel import bdist_wheel  # Debian 12: python3-wheel
    except ImportError:
        bdist_wheel = None

BUNDLED = os.path.isfile(os.path.join(os.path.dirname(os.path.abspath(__file__)), "simba", "libsimba.so"))


class NativeDistribution(Distribution):
    """A distribution that holds native code: its files go to platlib
    (Root-Is-Purelib: false) and its wheel gets the platform's tag."""

    def has_ext_modules(self):
        return BUNDLED


cmdclass = {}
if bdist_wheel is not None:

    class platform_wheel(bdist_wheel):
        def get_tag(self):
            python, abi, platform = super().get_tag()
            if BUNDLED:
                return "py3", "none", platform
            return python, abi, platform

    cmdclass["bdist_wheel"] = platform_wheel

setup(distclass=NativeDistribution, cmdclass=cmdclass)
