"""The file ``spark-submit`` runs (:mod:`.merge_cdc`), alone in its directory: ``spark-submit``
puts a script's directory first on ``sys.path``, where no module of this package may shadow one
of the standard library or of pyspark."""
