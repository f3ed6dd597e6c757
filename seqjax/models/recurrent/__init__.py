"""Recurrent networks' parts: the cells (`cells`), their scanned recurrence with its hand-written
backward (`recurrence`), and the layers, stacks and encoder built on them (`layers`)."""
