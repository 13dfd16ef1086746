"""Symbolic regression with fitted parameters: symreg_biology, symreg_chemistry, symreg_physics."""
