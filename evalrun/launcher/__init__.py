"""Starting graders: the stdin payload, the scrubbed environment, the child process, and the
rules that turn what a grader printed and its exit status into a result (docs/grader-protocol.md)."""
