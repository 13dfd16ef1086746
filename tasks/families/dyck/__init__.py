"""A bijection from Dyck paths to 321-avoiding permutations: dyck_bijection."""
