"""The `anneal` command line: every command over the same client, each with --json for scripts."""
