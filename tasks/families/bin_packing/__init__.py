"""FunSearch's online bin packing, driven one item at a time: bin_packing_or, bin_packing_weibull."""
