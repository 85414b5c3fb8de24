"""Scale-out over independent processes: `--shard i/N` and `merge`."""
