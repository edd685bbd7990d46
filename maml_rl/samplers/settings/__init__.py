"""What a sampler runs and how: the workload (env, buffers' spec, episodes per
task) and the execution settings (workers, start method, fast path, backend),
each decided once and frozen. Imported by the facade and the backends."""
