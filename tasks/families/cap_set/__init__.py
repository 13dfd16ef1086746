"""FunSearch's cap sets in Z_3^n: cap_set_4 to cap_set_8."""
