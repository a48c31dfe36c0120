"""Runs and the workers that execute them: a run and its watchers, scheduler, fair queues, broker, worker sockets, result cache."""
