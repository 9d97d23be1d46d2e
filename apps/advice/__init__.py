"""Strategy advice (issue #18, design.md §4.7): which policy loses the least training time for a job,
replayed from its own faults through the what-if model."""
