#!/usr/bin/env bash
# Copies this machine's Open MPI runtime into a bundle made by scripts/gpu-bundle.sh, so that
# `tandem launch` works on a GPU machine without Open MPI:
#   openmpi/bin/   mpirun (orterun) and orted
#   openmpi/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/
#                  Open MPI's plugins, at the place relative to the prefix where Open MPI looks
#                  for them once OPAL_PREFIX points at openmpi/ (the fabric plugins for UCX,
#                  libfabric, PSM and InfiniBand verbs are left out: one machine's workers talk
#                  through shared memory and TCP, and those plugins need libraries of their own)
#   openmpi/share/openmpi/  the help texts mpirun prints its errors with
#   pmix/          PMIx's plugins and help texts (found through PMIX_PREFIX)
#   lib/           the shared libraries all of these need, beside the bundle's others
# scripts/gpu-check-distribute.sh sets OPAL_PREFIX, PMIX_PREFIX, PATH and LD_LIBRARY_PATH.
#
#   scripts/bundle-openmpi.sh STAGE_DIR      (STAGE_DIR: the bundle's root, with lib/ in it)
set -euo pipefail

stage=${1:?usage: scripts/bundle-openmpi.sh STAGE_DIR}
multiarch=x86_64-linux-gnu
plugins_dir=/usr/lib/$multiarch/openmpi/lib/openmpi3
pmix_dir=/usr/lib/$multiarch/pmix2

fail() {
  echo "bundle-openmpi: $*" >&2
  exit 1
}

orterun=$(readlink -f "$(command -v mpirun || true)")
[ -x "$orterun" ] || fail "mpirun is not on PATH; install openmpi-bin (scripts/install-deps.sh)"
[ "$(basename "$orterun")" = orterun ] ||
  fail "mpirun is $orterun, not Open MPI's orterun; the bundle carries Open MPI only"
orted=$(dirname "$orterun")/orted
for needed in "$orted" "$plugins_dir" /usr/share/openmpi "$pmix_dir/lib/pmix"; do
  [ -e "$needed" ] || fail "$needed is missing; reinstall openmpi-bin and libpmix2"
done

mkdir -p "$stage/openmpi/bin" "$stage/openmpi/lib/$multiarch/openmpi/lib/openmpi3" \
  "$stage/openmpi/share" "$stage/pmix/lib" "$stage/pmix/share" "$stage/lib"
cp "$orterun" "$orted" "$stage/openmpi/bin/"
ln -sf orterun "$stage/openmpi/bin/mpirun"
ln -sf orterun "$stage/openmpi/bin/mpiexec"

plugins=()
for plugin in "$plugins_dir"/*.so; do
  case "$(basename "$plugin")" in
    *ucx* | *ofi* | *psm* | *openib* | *verbs*) ;;
    *) plugins+=("$plugin") ;;
  esac
done
cp "${plugins[@]}" "$stage/openmpi/lib/$multiarch/openmpi/lib/openmpi3/"
cp -r /usr/share/openmpi "$stage/openmpi/share/"
cp -r "$pmix_dir/lib/pmix" "$stage/pmix/lib/"
[ -d "$pmix_dir/share/pmix" ] && cp -r "$pmix_dir/share/pmix" "$stage/pmix/share/"

# Every library they load, except the C runtime (the GPU machine's own is used, as for the rest
# of the bundle).
for library in $(ldd "$orterun" "$orted" "${plugins[@]}" "$pmix_dir"/lib/pmix/*.so |
  awk '/=> \// {print $3}' | sort -u); do
  case "$(basename "$library")" in
    libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | librt.so.* | ld-linux*.so.* | \
      libgcc_s.so.* | libstdc++.so.*) ;;
    *) [ -e "$stage/lib/$(basename "$library")" ] || cp -L "$library" "$stage/lib/" ;;
  esac
done
strip --strip-unneeded "$stage"/openmpi/bin/* "$stage"/openmpi/lib/$multiarch/openmpi/lib/openmpi3/*.so \
  "$stage"/pmix/lib/pmix/*.so "$stage"/lib/*.so* 2>/dev/null || true
echo "bundle-openmpi: $(basename "$orterun") $(mpirun --version 2>/dev/null | head -1 | awk '{print $NF}'), ${#plugins[@]} plugins"
