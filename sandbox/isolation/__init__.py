"""What keeps a run in: bubblewrap, namespaces, seccomp, cgroups and rlimits, the paths a sandbox sees, GPU placement."""
