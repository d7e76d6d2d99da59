"""The operator's extras: what a receipts directory and a ledger say about an agent's actions.

Compatible with the TypeScript original's files and signatures (SPEC-EXTRAS): ``bundles`` and
``verify`` read and check the receipt bundles the receipts gateway writes; ``blast`` walks what
depended on a fact (and ``retract`` undoes it); ``explain`` answers the ten questions about one
receipt and ``actionpack`` signs them; ``pack`` is the signed custody pack of one fact;
``review`` and ``review_server`` show the receipts as local web pages; ``evals`` and
``evalfile`` are the memory-mutation harness. Nothing here is imported by the ledger or the
server; the command line imports each module only when its command runs.
"""
