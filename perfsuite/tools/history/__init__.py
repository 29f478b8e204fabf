"""Results kept per commit (:mod:`.store`), the steps in them (:mod:`.changepoints`), a static dashboard
(:mod:`.dashboard`) and a bisect to the commit that moved a metric (:mod:`.bisect`)."""
