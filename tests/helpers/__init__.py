"""What several test files share: runs, learners, task data, clusters. Never tests themselves."""
