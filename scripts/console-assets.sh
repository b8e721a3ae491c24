#!/usr/bin/env bash
# Vendors the NL Design System CSS the console is built on into
# crates/knooppunt-console/assets/console/vendor/, with their licences: the hub serves these
# files from its binary (include_bytes!), so nothing is fetched at run time. Run it again to
# move to newer versions (and commit the result).
set -euo pipefail
cd "$(dirname "$0")/.."
components="@utrecht/component-library-css@9.0.4"
tokens="@nl-design-system-unstable/voorbeeld-design-tokens@7.4.1"
out=crates/knooppunt-console/assets/console/vendor
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "$components" "$tokens" >/dev/null)
for tgz in "$work"/*.tgz; do
  mkdir -p "${tgz%.tgz}"
  tar xzf "$tgz" -C "${tgz%.tgz}"
done
c=$(ls -d "$work"/utrecht-component-library-css-*/package)
t=$(ls -d "$work"/nl-design-system-unstable-voorbeeld-design-tokens-*/package)
mkdir -p "$out"
cp "$c/dist/index.css" "$out/utrecht-components.css"
cp "$c/LICENSE.md" "$out/utrecht-components.LICENSE.md"
cp "$t/dist/theme.css" "$out/voorbeeld-theme.css"
cp "$t/LICENSE.md" "$out/voorbeeld-theme.LICENSE.md"
{
  echo "# Vendored NL Design System CSS"
  echo
  echo "Made by \`scripts/console-assets.sh\`; do not edit by hand."
  echo
  echo "| file | package | licence | sha256 |"
  echo "| --- | --- | --- | --- |"
  for f in utrecht-components.css voorbeeld-theme.css; do
    case $f in
      utrecht*) pkg=$components; lic=utrecht-components.LICENSE.md ;;
      *) pkg=$tokens; lic=voorbeeld-theme.LICENSE.md ;;
    esac
    echo "| $f | \`$pkg\` (npm) | EUPL-1.2 ([$lic]($lic)) | \`$(sha256sum "$out/$f" | cut -d' ' -f1)\` |"
  done
  echo
  echo "The theme names the font Noto Sans; the hub serves no font (nothing external at run"
  echo "time), so browsers show Noto Sans where it is installed and their sans-serif otherwise."
} > "$out/README.md"
echo "vendored into $out"
