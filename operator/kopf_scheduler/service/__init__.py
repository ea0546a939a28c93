"""The operator runtime: the service and its wiring, configuration, SchedulingProfile management,
resync, binding confirmation, PodGroup status, metrics and the secure port, supervision, the intake pipe."""
