#!/usr/bin/env bash
# third-party.sh check|test|sync: the patched copy of Badger under third_party/badger.
#
# third_party/badger is github.com/dgraph-io/badger/v4 at $version (the files
# a build needs: its non-test .go files outside badger/ and integration/, and
# go.mod, go.sum, LICENSE) with third_party/patches/badger-*.patch applied;
# go.mod replaces the module with it. Why: third_party/README.md.
#
#   check  rebuild that tree from the module proxy into a temporary directory
#          and fail, with the difference, unless it equals the committed one
#          (so the copy holds upstream's code plus exactly the patch)
#   test   check, then run upstream's own tests of what the patches touch
#          (the value log, transactions, writes) on the patched tree
#   sync   write the rebuilt tree over third_party/badger (after changing
#          $version or a patch)
set -euo pipefail
version=v4.9.6
module=github.com/dgraph-io/badger/v4
root=$(cd "$(dirname "$0")/.." && pwd)
case "${1:-}" in
  check|test|sync) ;;
  -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "usage: scripts/third-party.sh check|test|sync (see --help)" >&2; exit 2 ;;
esac

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Outside any module, so that go.mod's replace does not apply.
src=$(cd "$tmp" && GOFLAGS=-mod=mod go mod download -json "$module@$version" |
  python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(d["Error"]) if d.get("Error") else print(d["Dir"])')
out="$tmp/badger"
mkdir -p "$out"
(cd "$src" && find . -type f \( -name '*.go' ! -name '*_test.go' -o -name go.mod -o -name go.sum -o -name LICENSE \) \
  ! -path './badger/*' ! -path './integration/*' -print0 | tar -cf - --null -T - | tar -xf - -C "$out")
chmod -R u+w "$out"
for p in "$root"/third_party/patches/badger-*.patch; do
  patch -s -p1 -d "$out" <"$p" || { echo "third-party.sh: $p does not apply to $module@$version" >&2; exit 1; }
done
find "$out" -name '*.orig' -delete

if [ "$1" = sync ]; then
  rm -rf "$root/third_party/badger"
  cp -a "$out" "$root/third_party/badger"
  echo "third_party/badger: $module@$version with $(ls "$root"/third_party/patches/badger-*.patch | wc -l) patch(es)"
  exit 0
fi
if ! diff -ru "$out" "$root/third_party/badger" >"$tmp/diff"; then
  echo "third_party/badger differs from $module@$version plus third_party/patches (run scripts/third-party.sh sync):" >&2
  sed 's|'"$tmp"'/badger|upstream+patches|' "$tmp/diff" | head -100 >&2
  exit 1
fi
echo "third_party/badger: $module@$version plus $(ls "$root"/third_party/patches/badger-*.patch | wc -l) patch(es), as committed"

if [ "$1" = test ]; then
  # Upstream's test files beside the patched sources, in the temporary tree.
  (cd "$src" && find . -maxdepth 1 -name '*_test.go' -print0 | tar -cf - --null -T - | tar -xf - -C "$out")
  chmod -R u+w "$out"
  echo "running $module@$version's value-log, transaction and write tests on the patched tree..."
  # Skipped: TestValueGCManaged is flaky on release v4.9.6 too (failed 2 of
  # 14 runs here unpatched, 4 of 34 patched): in a failing run no discard
  # statistics exist after its Flatten, so value-log GC has nothing to pick;
  # whether they do depends on how background compaction interleaves with
  # the test's writes.
  (cd "$out" && go test -count=1 -run 'TestValue|TestVlog|TestTxn|TestWrite|TestPersistLFDiscardStats|TestDiscard|TestGetMore|TestSyncWrites|TestTruncateVlog|TestForceFlushMemtable|TestPartialAppendToWAL|TestReadOnlyOpenWithPartialAppendToWAL|TestPenultimateMemCorruption|TestEncryption|TestReplay|TestOpen' \
    -skip '^TestValueGCManaged$' .)
fi
