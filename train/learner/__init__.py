"""The learner: the GRPO step (the loss, eq. 4, via verl; the shared-prefix layout), the supervised step beside it
(the warm start's fine-tune), the backends that place the policy on one or many ranks, and export. It imports no
other HELIX package and no other room of train/ (tests/docs/test_architecture.py), so it can be read, tested and
reused on its own."""
