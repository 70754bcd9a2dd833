;; Datalevin's side of Vev's `mbrainz` benchmark.
;;
;; Usage: java <flags> -cp <classes>:<datalevin-runtime.jar> clojure.main mbrainz.clj \
;;          <mbrainz-fixture.json> memory|disk <db-dir>
;; Reads the fixture `vev-bench mbrainz` wrote (timing parameters, Datalevin's schema, the
;; rule set in Datalevin's form, the queries) and the datoms file it names (one JSON array
;; [e, "ns/attr", v] per line: Vev's datoms with the entity ids the peers share). Makes the
;; datoms with `d/datom` first, untimed, then times Datalevin's documented bulk path ("filling
;; a Datalog database quickly with a sequence of trusted datoms"): `(d/init-db datoms dir
;; schema)` of all but the full-text datoms, then `d/fill-db` of those in runs of 1,000 (see
;; `fulltext-run` for why). No transaction processing; each call is one LMDB write
;; transaction with syncing off until its end. `memory` passes a nil dir, as
;; clj/query.clj's `create-conn` does: Datalevin then opens its store in a fresh temporary
;; directory (java.io.tmpdir, which the parent points into its scratch directory); `disk`
;; uses <db-dir>/mbrainz.
;;
;; Then each query, as clj/query.clj runs them: untimed at least `warmup` times and for at
;; least `warmup_ms`, then `reps` times timed (fewer once the timed runs pass `budget_ms`,
;; never fewer than 3), with the query result cache off. Query 8 is two calls, the second
;; with the first's result as its relation.
;;
;; Output, one JSON line each: {"engine", "version", "java_version"}; {"load_ms", "datoms"};
;; per query {"start": name} as it begins (the parent's watchdog names a query that hangs),
;; then {"name", "rows", "samples_ms", "result"} with the last timed run's rows (strings,
;; numbers, {"kw": "ns/name"}, {"uuid": text}), or {"name", "skipped": why}.

(require '[datalevin.core :as d]
         '[datalevin.query :as dq]
         '[datalevin.query.cache :as qcache]
         '[datalevin.constants :as dc]
         '[jsonista.core :as json]
         '[clojure.edn :as edn]
         '[clojure.java.io :as io])

(alter-var-root #'dq/*cache?* (constantly false))
(alter-var-root #'qcache/*cache?* (constantly false))

(defn log [& xs]
  (binding [*out* *err*] (apply println "datalevin:" xs)))

(defn now-ms ^double [] (/ (System/nanoTime) 1e6))

(def fixture-path (first *command-line-args*))
(def mode (second *command-line-args*))
(def db-root (nth *command-line-args* 2 nil))

(when-not (and fixture-path (#{"memory" "disk"} mode) db-root)
  (binding [*out* *err*]
    (println "usage: clojure.main mbrainz.clj <mbrainz-fixture.json> memory|disk <db-dir>"))
  (System/exit 2))

(def fixture (json/read-value (io/file fixture-path)))
(def warmup (long (fixture "warmup")))
(def warmup-ms (double (fixture "warmup_ms")))
(def reps (long (fixture "reps")))
(def budget-ms (double (fixture "budget_ms")))
(def schema (edn/read-string (get-in fixture ["schemas" "datalevin"])))
(def rules (edn/read-string (get-in fixture ["rules" "datalevin"])))

(def decode
  (into {}
        (for [[attr type] (fixture "attributes")]
          [attr (case type
                  "string" identity
                  "keyword" keyword
                  "uuid" #(java.util.UUID/fromString %)
                  ("long" "ref") long)])))

(defn read-datoms []
  (with-open [r (io/reader (fixture "datoms_path"))]
    (let [out (java.util.ArrayList.)]
      (doseq [line (line-seq r) :when (seq line)]
        (let [[e a v] (json/read-value line)]
          (.add out (d/datom (long e) (keyword a) ((decode a) v)))))
      out)))

(defn emit [m]
  (println (json/write-value-as-string m))
  (flush))

(defn quantile [sorted q]
  (let [n    (count sorted)
        rank (long (Math/ceil (* q n)))]
    (nth sorted (dec (min (max rank 1) n)))))

(defn measure
  "Warm `run` up, then time up to `reps` calls: the last result and the samples."
  [run]
  (let [start (now-ms)]
    (loop [i 0]
      (when (or (< i warmup) (< (- (now-ms) start) warmup-ms))
        (run)
        (recur (inc i)))))
  (loop [samples [] spent 0.0 result nil]
    (if (and (< (count samples) reps) (or (< (count samples) 3) (< spent budget-ms)))
      (let [start  (now-ms)
            result (run)
            ms     (- (now-ms) start)]
        (recur (conj samples ms) (+ spent ms) result))
      [result samples])))

(defn cell [x]
  (cond
    (keyword? x) {"kw" (subs (str x) 1)}
    (uuid? x) {"uuid" (str x)}
    (ratio? x) (double x)
    :else x))

(defn rows-of
  "A query result as rows of cells: a relation as is, a collection or a scalar as one-cell rows."
  [result]
  (cond
    (nil? result) []
    (and (coll? result) (every? sequential? result)) (mapv #(mapv cell %) result)
    (coll? result) (mapv #(vector (cell %)) result)
    :else [[(cell result)]]))

(emit {"engine"       (str "datalevin-" mode)
       "version"      dc/version
       "java_version" (System/getProperty "java.version")})

(def fulltext-attrs
  "Attributes whose values Datalevin indexes for full-text search."
  (set (for [[attr props] schema :when (:db/fulltext props)] attr)))

;; Datalevin 1.2.8 keeps only about the last 1,024 documents that one LMDB write transaction
;; adds to a full-text domain, silently (measured on the tiny set: one `init-db` of all 13,018
;; track names finds 11 of the 246 holding "always"; `fill-db` calls of 1,000 track names
;; find all 246, of 1,500 find 76; of 1,100 full-text datoms of the three attributes, about
;; 940 of them track names, all; of 1,200, about 1,030 track names, 161). So the load is
;; `init-db` of every other datom, then `fill-db` (the same bulk path, one write transaction
;; per call) of the full-text datoms in runs of `fulltext-run`, timed together: what a
;; Datalevin user must do for a complete index. The benchmark compares q5's rows with Vev's.
(def fulltext-run 1000)

(def db
  (let [datoms (read-datoms)
        text?  #(contains? fulltext-attrs (:a %))
        plain  (filterv (complement text?) datoms)
        texts  (filterv text? datoms)
        dir    (when (= mode "disk") (str (io/file db-root "mbrainz")))
        start  (now-ms)
        db     (reduce d/fill-db (d/init-db plain dir schema) (partition-all fulltext-run texts))
        ms     (- (now-ms) start)]
    (log (format "init-db of %d datoms, fill-db of %d full-text datoms in runs of %d (%s) in %.0f ms"
                 (count plain) (count texts) fulltext-run (or dir "nil dir") ms))
    (emit {"load_ms" ms "datoms" (count datoms)})
    db))

(doseq [spec (fixture "queries")]
  (if-let [why (get-in spec ["cannot_run" "datalevin"])]
    (emit {"name" (spec "name") "skipped" why})
    (let [_      (emit {"start" (spec "name")})
          query  (edn/read-string (spec "query"))
          inputs (cond-> []
                   (spec "rules") (conj rules)
                   (spec "input") (conj (edn/read-string (spec "input"))))
          run    (if (spec "feeds_itself")
                   #(let [first-run (apply d/q query db inputs)]
                      (apply d/q query db (conj (pop inputs) (vec first-run))))
                   #(apply d/q query db inputs))
          [result samples] (measure run)
          rows   (rows-of result)]
      (log (format "%s %d rows, p50 %.3f ms (%d runs)" (spec "name") (count rows)
                   (double (quantile (vec (sort samples)) 0.5)) (count samples)))
      (emit {"name" (spec "name") "rows" (count rows) "samples_ms" samples "result" rows}))))

(d/close-db db)
(shutdown-agents)
(System/exit 0)
