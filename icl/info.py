"""``python -m icl.info``: version, native build and the state of every backend."""

from __future__ import annotations

import platform
import sys


def collect() -> dict:
    import icl
    from icl.ops import load_all
    from icl.ops._dispatch import BACKENDS, backend_status, registered_ops

    load_all()
    info: dict = {
        "icl": icl.__version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
    }
    try:
        import torch

        info["torch"] = torch.__version__
    except ImportError:
        info["torch"] = None
    try:
        from icl import _C

        info["native"] = dict(_C.build_info) | {"threads": _C.max_threads(), "thread_policy": _C.thread_policy(),
                                                "team_now": _C.team_size()}
    except ImportError as exc:
        info["native"] = {"error": str(exc)}
    info["backends"] = {name: dict(zip(("available", "why"), backend_status(name))) for name in BACKENDS}
    info["ops"] = {name: sorted(o.impls) for name, o in sorted(registered_ops().items())}
    return info


def main() -> None:
    info = collect()
    print(f"icl {info['icl']}  (python {info['python']}, torch {info['torch']}, {info['platform']})")
    native = info["native"]
    if "error" in native:
        print(f"native module: not available ({native['error']})")
    else:
        omp = (f"OpenMP {native.get('openmp_version')}, {native['threads']} threads, {native['thread_policy']} policy "
               f"({native['team_now']} now)" if native.get("openmp") else "no OpenMP")
        print(f"native module: {native['compiler']}, {native['build_type']}, {omp}, CUDA sources {'built' if native.get('cuda') else 'not built'}")
    print("backends:")
    for name, st in info["backends"].items():
        print(f"  {name:<10} {'yes' if st['available'] else 'no ':<4} {st['why']}")
    print("ops:")
    for name, impls in info["ops"].items():
        print(f"  {name:<24} {', '.join(impls)}")


if __name__ == "__main__":
    main()
