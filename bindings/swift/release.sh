#!/usr/bin/env bash
# Prepares a Swift package release on a Mac: builds TernFFI.xcframework.zip, writes its URL and
# checksum into the root Package.swift, and stages the generated Swift, which apps that add the
# package by URL compile from the tagged commit.
#
# usage: bindings/swift/release.sh VERSION URL
#   URL: where TernFFI.xcframework.zip will be downloaded from (e.g. the release's asset URL)
# Then: upload the zip to URL, commit, and tag VERSION.
set -euo pipefail

[[ $# == 2 ]] || { echo "usage: $0 VERSION URL" >&2; exit 2; }
VERSION=$1
URL=$2
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

"$HERE/build-xcframework.sh" --zip
CHECKSUM=$(cd "$HERE" && swift package compute-checksum TernFFI.xcframework.zip)
MANIFEST=$ROOT/Package.swift
grep -q '^let published: (url: String, checksum: String)? = ' "$MANIFEST" \
    || { echo "error: $MANIFEST has no 'let published' line to write" >&2; exit 1; }
sed -i '' -E "s|^let published: \(url: String, checksum: String\)\? = .*|let published: (url: String, checksum: String)? = (url: \"$URL\", checksum: \"$CHECKSUM\")|" "$MANIFEST"
# Ignored for development builds; a release commits it.
git -C "$ROOT" add -f bindings/swift/Sources/Tern/Generated/Tern.swift Package.swift
echo "== Package.swift now points at $URL ($CHECKSUM)"
echo "upload $HERE/TernFFI.xcframework.zip there, then: git commit -m 'swift: release $VERSION' && git tag $VERSION"
