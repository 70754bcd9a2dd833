;; Datalevin's side of Vev's `query` benchmark.
;;
;; Usage: java <flags> -cp <classes>:<datalevin-runtime.jar> clojure.main query.clj \
;;          <query-fixture.json> memory|disk [<db-dir>]
;; Runs on the runtime jar of PyPI's `datalevin` wheel, through Datalevin's own Clojure API
;; (datalevin.core), not through the Python bridge. Reads the databases, Datalevin's schema
;; and the queries that `vev-bench query` wrote; builds each database once, in memory
;; (`create-conn` with a nil dir: LMDB's in-memory mode) or on disk (a directory under
;; <db-dir>); and runs each query untimed at least `warmup` times and for at least `warmup_ms`,
;; then `reps` times timed (fewer if the timed runs pass `budget_ms`, but at least 3). Prints one JSON line first, {"engine",
;; "version"}, then one per query: {"name", "rows", "median_ms", "p95_ms", "samples_ms"}.
;; Progress goes to stderr.
;;
;; Query texts and inputs are read with clojure.edn once, before timing, as a Clojure caller
;; holds a literal query; the timed call is `(d/q query db & inputs)` or `(d/pull db pattern
;; root)`. Datalevin's query result cache is turned off: with it every repetition after the
;; first is a cache hit that returns the previous result. Its parse and plan caches stay on,
;; as DataScript's parse cache does.

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

(when-not (and fixture-path (#{"memory" "disk"} mode) (or (= mode "memory") db-root))
  (binding [*out* *err*]
    (println "usage: clojure.main query.clj <query-fixture.json> memory|disk [<db-dir>]"))
  (System/exit 2))

(def fixture (json/read-value (io/file fixture-path)))
(def warmup (long (fixture "warmup")))
(def warmup-ms (double (fixture "warmup_ms")))
(def reps (long (fixture "reps")))
(def budget-ms (double (fixture "budget_ms")))
(def schema (edn/read-string (get-in fixture ["schemas" "datalevin"])))

(def decode
  (into {}
        (for [[attr type] (fixture "attributes")]
          [attr (case type
                  "string" identity
                  "keyword" keyword
                  ("long" "ref") long)])))

(defn tx-data [rows]
  (mapv (fn [[e a v]] [:db/add (long e) (keyword a) ((decode a) v)]) rows))

(def conns (atom {}))

(defn build-conn [db-name]
  (let [rows  (get-in fixture ["dbs" db-name])
        dir   (when (= mode "disk") (str (io/file db-root db-name)))
        start (now-ms)
        conn  (d/create-conn dir schema)]
    (doseq [batch (partition-all 10000 (tx-data rows))]
      (d/transact! conn (vec batch)))
    (log (format "built %s (%d datoms, %s) in %.0f ms"
                 db-name (count rows) (or dir "in memory") (- (now-ms) start)))
    conn))

(defn conn-for [db-name]
  (or (@conns db-name)
      (let [conn (build-conn db-name)]
        (swap! conns assoc db-name conn)
        conn)))

(defn pulled
  "Entities in a pull result: the map itself and every map under :follows."
  [m]
  (if (map? m)
    (inc (reduce + 0 (map pulled (:follows m))))
    0))

(defn quantile [sorted q]
  (let [n    (count sorted)
        rank (long (Math/ceil (* q n)))]
    (nth sorted (dec (min (max rank 1) n)))))

(defn median [sorted]
  (let [n (count sorted)]
    (if (odd? n)
      (nth sorted (quot n 2))
      (/ (+ (nth sorted (dec (quot n 2))) (nth sorted (quot n 2))) 2.0))))

(defn measure
  "Warm `run` up, then time up to `reps` calls; `count-rows` gives the last result's rows."
  [run count-rows]
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
      (let [sorted (vec (sort samples))]
        {"rows"       (count-rows result)
         "median_ms"  (median sorted)
         "p95_ms"     (quantile sorted 0.95)
         "samples_ms" samples}))))

(defn emit [m]
  (println (json/write-value-as-string m))
  (flush))

(emit {"engine"       (str "datalevin-" mode)
       "version"      dc/version
       "java_version" (System/getProperty "java.version")})

(doseq [spec (fixture "queries")]
  (let [db     (d/db (conn-for (spec "db")))
        result (if-let [pattern (spec "pull")]
                 (let [pattern (edn/read-string pattern)
                       root    (long (spec "root"))]
                   (measure #(d/pull db pattern root) pulled))
                 (let [query  (edn/read-string (spec "query"))
                       inputs (mapv edn/read-string (spec "inputs"))]
                   (measure #(apply d/q query db inputs) count)))]
    (log (format "%s %d rows, median %.3f ms" (spec "name") (result "rows") (result "median_ms")))
    (emit (assoc result "name" (spec "name")))))

(doseq [conn (vals @conns)] (d/close conn))
(shutdown-agents)
(System/exit 0)
