#!/usr/bin/env bash
# Install the Debian/Ubuntu packages named as arguments when they are missing.
# As root with apt-get, installs them; otherwise prints one line saying exactly what to
# run. Never fails by itself: the step that needs a package says so if it is still
# missing (`auditor setup` for WordNet, which can also use NLTK's downloader; the
# browser test skips without Chromium). Installed packages cost one `dpkg -s` each.
#   scripts/system-packages.sh wordnet-base wordnet-sense-index
set -u
missing=()
for package in "$@"; do
  dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing system packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null && exit 0
  echo "could not install ${missing[*]} with apt-get" >&2
elif command -v apt-get >/dev/null 2>&1; then
  echo "missing system packages: run \`sudo apt-get install ${missing[*]}\`, then \`make\` again" >&2
else
  echo "missing system packages ${missing[*]} (Debian/Ubuntu names): install their equivalents" >&2
fi
exit 0
