"""Which GPU: enumerate GPU x count x buy/rent, filter with a reason for every rejection, rank, explain."""
