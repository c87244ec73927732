"""Communication: the instrumented communicator (:mod:`.communicator`), all-reduce
algorithms from point-to-point messages (:mod:`.allreduce`), their alpha-beta costs
(:mod:`.costmodel`), flat gradient buckets and backward overlap (:mod:`.flat`) and the
gossip topologies (:mod:`.topology`).
"""
