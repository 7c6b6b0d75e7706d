"""Sandbox profiles: named per request, carried across the queue, refused with the packages to install where a
host lacks them, an image each for the container backends, and one list of packages in the Python and the
scripts that install them."""

import re
from pathlib import Path

import pytest

from sandboxes.backends.bwrap import BwrapBackend
from sandboxes.profiles import IN_BASE_IMAGE, PROFILES, Profile, image_for, installed_here, missing_here
from sandboxes.types import RunRequest, Status

ROOT = Path(__file__).resolve().parents[2]


def test_a_request_names_its_profile_and_keeps_it_across_the_queue():
    request = RunRequest(language="python", code="print(1)", profile="c-cpp")
    assert RunRequest.from_dict(request.to_dict()).profile == "c-cpp"
    older = request.to_dict()
    del older["profile"]  # from a client that predates profiles
    assert RunRequest.from_dict(older).profile == "python"
    with pytest.raises(
        ValueError, match="unknown sandbox profile 'rust'; profiles: python, python-science, shell, c-cpp"
    ):
        RunRequest(language="python", code="", profile="rust")


def test_profiles_map_to_images_next_to_the_base_one():
    base = "localhost/anneal-sandbox:bookworm"
    assert image_for("c-cpp", base) == "localhost/anneal-sandbox-c-cpp:bookworm"
    assert image_for("javascript", "registry.example:5000/anneal/sandbox") == (
        "registry.example:5000/anneal/sandbox-javascript"
    )
    assert {name: image_for(name, base) for name in IN_BASE_IMAGE} == dict.fromkeys(IN_BASE_IMAGE, base)


def test_a_host_without_a_profiles_toolchain_says_which_packages_to_install(monkeypatch, tmp_path):
    fake = Profile(
        "c-cpp", "gcc", ("gcc", "anneal-missing-compiler"), ("/usr/bin/anneal-missing-compiler",), 256
    )
    monkeypatch.setitem(PROFILES, "c-cpp", fake)
    assert missing_here("c-cpp") == ["/usr/bin/anneal-missing-compiler"]
    assert "c-cpp" not in installed_here()
    result = BwrapBackend().run(RunRequest(language="python", code="print(1)", profile="c-cpp"))
    assert result.status == Status.SANDBOX_ERROR
    assert result.stderr == (
        "sandbox profile c-cpp is not installed on this host: no /usr/bin/anneal-missing-compiler "
        "(Debian packages gcc anneal-missing-compiler; scripts/setup-system.sh toolchains installs them)"
    )
    (tmp_path / "usr/bin").mkdir(parents=True)
    (tmp_path / "usr/bin/anneal-missing-compiler").touch()
    assert missing_here("c-cpp", root=str(tmp_path)) == []


def test_this_host_has_every_profile_the_suite_runs():
    # scripts/setup-system.sh test installs the toolchains; code_tests' tests run on them.
    assert installed_here() == list(PROFILES)


def test_the_scripts_install_each_profiles_packages():
    images = (ROOT / "scripts/sandbox-image.sh").read_text()
    built = dict(re.findall(r'build_image "\$\(profile_image ([a-z-]+)\)" ([a-z0-9+,.-]+)', images))
    own_image = {name for name in PROFILES if name not in IN_BASE_IMAGE}
    assert {name: set(packages.split(",")) for name, packages in built.items()} == {
        name: set(PROFILES[name].packages) for name in own_image
    }
    setup = (ROOT / "scripts/setup-system.sh").read_text()
    toolchains = set(re.search(r"TOOLCHAIN_PACKAGES=\(([^)]*)\)", setup).group(1).split())
    needed = {package for name in own_image for package in PROFILES[name].packages} - {"python3"}
    # PostgreSQL's server comes with scripts/test-services.sh, which installs and sets up the tests' own.
    assert needed - toolchains == {"postgresql-15"}
    assert "postgresql" in (ROOT / "scripts/test-services.sh").read_text()
