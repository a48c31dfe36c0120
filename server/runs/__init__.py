"""Runs and the workers that execute them: scheduler, fair queues, broker, worker sockets, result cache."""
