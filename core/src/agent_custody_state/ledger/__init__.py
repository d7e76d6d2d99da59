"""The bitemporal ledger: the fact and event model, the rules, the queries, forget and retention."""
