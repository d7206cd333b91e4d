"""Data-quality auditing tasks (DESIGN §5.5): seeded error injection with cluster gold, and the scorer."""
