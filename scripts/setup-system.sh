#!/usr/bin/env bash
# Installs the Debian packages Anneal needs that are missing, and nothing else; quiet when all are present.
# Usage: scripts/setup-system.sh [runtime|toolchains|test]   (runtime: what `make demo` needs; toolchains: that
# plus the sandbox profiles' compilers and runtimes; test: both plus the tools `make test` uses). Needs root only when something is missing. Safe to run any number of times.
set -euo pipefail

# What the platform itself runs with.
#   bubblewrap       the local sandbox backend (bwrap) that runs verifier programs
#   libseccomp2      compiles the sandbox's seccomp filter (sandboxes/backends/seccomp.py, through ctypes)
#   ca-certificates  pip's TLS to PyPI on a slim Debian
RUNTIME_PACKAGES=(bubblewrap libseccomp2 ca-certificates)

# The toolchains of the sandbox profiles (sandboxes/profiles.py) that a bubblewrap host runs programs with:
# its own /usr, bound read-only into every sandbox. (The docker backend's images hold their own.)
#   gcc, g++, libc6-dev  c-cpp: the code_tests verifier's C and C++
#   nodejs               javascript
#   librsvg2-bin         render: the render verifier's rsvg-convert
#   libreoffice-calc-nogui  spreadsheet: the spreadsheet verifier's formulas, evaluated headless
#   python3-numpy, -scipy, -pandas, -sympy  python-science: python_tests with `libraries`
#   python3-psycopg2     sql-postgres: sql_result's engine postgresql (its server binaries come with the
#                        PostgreSQL that scripts/test-services.sh installs and sets up; installed here first,
#                        Debian's package would start a cluster that script then takes for the tests' own)
TOOLCHAIN_PACKAGES=(gcc g++ libc6-dev nodejs librsvg2-bin libreoffice-calc-nogui python3-numpy python3-scipy
  python3-pandas python3-sympy python3-psycopg2)

# What the test suite uses on top. PostgreSQL and Redis are left to scripts/test-services.sh, which
# installs them only when nothing answers on their ports.
#   chromium, chromium-driver  the browser the e2e tests drive through Playwright (never `playwright install`)
#   docker-compose             Debian's 1.29.2: `docker-compose config` validates docker-compose.yml, no engine needed
#   podman, runc, debootstrap, curl  the docker sandbox backend's engine (Podman's Docker API) and its image,
#                              built from Debian packages by `make sandbox-image` (scripts/sandbox-image.sh)
#   golang-github-containernetworking-plugin-dnsname  names of the compose cluster's containers in DNS on
#                              Podman's CNI networks (`make compose-up`, scripts/compose-up.sh)
TEST_PACKAGES=(chromium chromium-driver docker-compose podman runc debootstrap curl
  golang-github-containernetworking-plugin-dnsname)

profile=${1:-runtime}
case "$profile" in
  runtime) wanted=("${RUNTIME_PACKAGES[@]}") ;;
  toolchains) wanted=("${RUNTIME_PACKAGES[@]}" "${TOOLCHAIN_PACKAGES[@]}") ;;
  test) wanted=("${RUNTIME_PACKAGES[@]}" "${TOOLCHAIN_PACKAGES[@]}" "${TEST_PACKAGES[@]}") ;;
  *) echo "usage: $0 [runtime|toolchains|test]" >&2; exit 2 ;;
esac

# `python3.11 -m venv` needs ensurepip, which Debian ships apart from the interpreter.
python=${PYTHON:-python3.11}
if ! command -v "$python" >/dev/null; then
  wanted+=(python3.11 python3.11-venv)
elif ! "$python" -c 'import ensurepip' 2>/dev/null; then
  wanted+=(python3.11-venv)
fi

missing=()
for package in "${wanted[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$package")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null; then
  echo "Anneal needs these Debian packages (or your system's equivalents): ${missing[*]}" >&2
  exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "Missing Debian packages: ${missing[*]}" >&2
  echo "Install them as root: apt-get install -y --no-install-recommends ${missing[*]}" >&2
  exit 1
fi
echo "Installing Debian packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
