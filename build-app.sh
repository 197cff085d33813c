#!/usr/bin/env bash
# build-app.sh — builds dist/StartLux.app and dist/StartLux.zip (called by
# `./build.sh app`). See docs/app.md.
#
# Environment:
#   VERSION        CFBundleShortVersionString (default: latest v* tag, else 0.1.0)
#   BUILD_NUMBER   CFBundleVersion (default: the commit count)
#   SIGN_IDENTITY  on a Mac: the codesign identity ("-" for ad hoc, the default)
#   QUILL_P12      off a Mac: a .p12 identity for quill (password in
#                  QUILL_SIGN_PASSWORD); without it executables are signed ad hoc
set -euo pipefail
cd "$(dirname "$0")"
export CGO_ENABLED=0

version=${VERSION:-$(git describe --tags --abbrev=0 --match 'v[0-9]*' 2>/dev/null | sed 's/^v//' || true)}
version=${version:-0.1.0}
build=${BUILD_NUMBER:-$(git rev-list --count HEAD 2>/dev/null || echo 1)}
out=dist
app=$out/StartLux.app
zip=$out/StartLux.zip
mkdir -p "$out"
rm -f "$zip"

if [ "$(uname -s)" = Darwin ] && command -v codesign >/dev/null; then
	# On a Mac codesign signs every executable with the hardened runtime and
	# then seals the bundle (Contents/_CodeSignature/CodeResources).
	go run ./tools/bundle/mkapp -out "$out" -version "$version" -build "$build" -sign none
	identity=${SIGN_IDENTITY:--}
	ts=()
	[ "$identity" != "-" ] && ts=(--timestamp)
	codesign --force --options runtime "${ts[@]}" --sign "$identity" \
		--identifier dev.startlux.startlux "$app/Contents/Helpers/startlux"
	codesign --force --options runtime "${ts[@]}" --sign "$identity" "$app"
	codesign --verify --strict --verbose=2 "$app"
	ditto -c -k --keepParent "$app" "$zip"
else
	sign=adhoc
	p12=()
	if [ -n "${QUILL_P12:-}" ]; then
		sign=p12
		p12=(-p12 "$QUILL_P12")
	fi
	go run ./tools/bundle/mkapp -out "$out" -version "$version" -build "$build" -sign "$sign" "${p12[@]}" -zip
	echo "note: built off a Mac, the bundle is not sealed; seal it on a Mac before distributing it (docs/app.md)." >&2
fi
