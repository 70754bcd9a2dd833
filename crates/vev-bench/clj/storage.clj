;; Datalevin's side of Vev's `storage` benchmark: durable small transactions.
;;
;; Usage: java <flags> -cp <classes>:<datalevin-runtime.jar> clojure.main storage.clj <spec.json>
;; Runs on the runtime jar of PyPI's `datalevin` wheel, through Datalevin's own Clojure API.
;; The spec (written by `vev-bench storage`) names the database directory, the sizes, the
;; shapes in run order with their offsets, and the repetition counts. The data are the same
;; formulas as `src/storage_fixture.rs` (account j, measurement k); keep the two in step.
;;
;; Each database is an LMDB directory created with Datalevin's defaults (a new local store is
;; `:wal? false`; LMDB env flags `#{:nordahead :notls}`, no `:nosync`, so every write
;; transaction's commit is synced before `transact!` returns). Resident accounts go in with
;; `init-db` (Datalevin's bulk path for trusted datoms, not timed). Before any measurement the
;; JVM is warmed up on a scratch database: `jvm_warmup` transactions of every shape (the JIT
;; needs far more than 5 runs; Vev, compiled ahead of time, does not). Then every size is
;; built, and per shape `warmup` untimed and `measurements` timed calls of
;; `(d/transact! conn tx-data)` run on every size in turn, each timed alone with
;; System/nanoTime; entity ids are resolved before the clock starts and removing shapes restore
;; what they removed afterwards (untimed), as on Vev's side.
;;
;; Each shape runs in the spec's rounds (first touch of each account, then the same accounts
;; again), as on Vev's side.
;;
;; Prints one JSON line {"engine", "version", "java_version", "env_flags"}, then one per size
;; {"entities", "build_ms"} and one per size, shape and round {"entities", "shape", "round",
;; "datoms", "samples_us"} ("datoms": the distinct tx-data counts of the timed calls). Progress
;; goes to stderr.

(require '[datalevin.core :as d]
         '[datalevin.constants :as dc]
         '[jsonista.core :as json]
         '[clojure.java.io :as io])

(defn log [& xs]
  (binding [*out* *err*] (apply println "datalevin:" xs)))

(defn emit [m]
  (println (json/write-value-as-string m))
  (flush))

(def spec (json/read-value (io/file (first *command-line-args*))))
(def root (spec "dir"))
(def warmup (long (spec "warmup")))
(def measurements (long (spec "measurements")))
(def jvm-warmup (long (spec "jvm_warmup")))
(def jvm-warmup-entities (long (spec "jvm_warmup_entities")))
(def cities (vec (spec "cities")))
(def shapes (vec (spec "shapes")))
(def rounds (vec (spec "rounds")))

(def schema
  {:acct/id      {:db/valueType :db.type/long :db/cardinality :db.cardinality/one
                  :db/unique :db.unique/identity}
   :acct/name    {:db/valueType :db.type/string :db/cardinality :db.cardinality/one}
   :acct/balance {:db/valueType :db.type/long :db/cardinality :db.cardinality/one}
   :acct/city    {:db/valueType :db.type/string :db/cardinality :db.cardinality/one}
   :acct/score   {:db/valueType :db.type/long :db/cardinality :db.cardinality/one}
   :audit/source {:db/valueType :db.type/string :db/cardinality :db.cardinality/one}
   :audit/reason {:db/valueType :db.type/string :db/cardinality :db.cardinality/one}})

(defn account
  "Resident account j: the formulas of storage_fixture.rs `account`."
  [j]
  [[:acct/id j]
   [:acct/name (str "name-" j)]
   [:acct/balance (mod (* j 7919) 100000)]
   [:acct/city (cities (mod j 8))]
   [:acct/score (mod j 1000)]])

(defn stride [n] (if (zero? (mod n 7919)) 7907 7919))

(defn target [offset k n] (inc (mod (+ (* k (stride n)) offset) n)))

(defn build-conn
  "A durable database of n accounts (entity j is account j) in dir, loaded with init-db."
  [dir n]
  (let [start  (System/nanoTime)
        datoms (for [j (range 1 (inc n)) [a v] (account j)] (d/datom j a v))
        db     (d/init-db datoms dir schema)
        conn   (d/conn-from-db db)]
    [conn (/ (- (System/nanoTime) start) 1e6)]))

(defn eid [db j]
  (or (d/entid db [:acct/id j])
      (throw (ex-info "missing account" {:id j}))))

(defn shape-tx
  "Measurement k of a shape on db (n accounts): {:tx timed-tx-data, :restore untimed-or-nil}.
  The account comes from k; the values written from k plus the round's value offset."
  [shape offset k value-offset n db]
  (let [j (target offset k n)
        k (+ k value-offset)]
    (case shape
      "append"  {:tx [{:acct/name    (str "new-" k)
                       :acct/balance k
                       :acct/city    (cities (mod k 8))}]}
      "replace" {:tx [[:db/add (eid db j) :acct/balance (+ 1000000 k)]]}
      "retract" (let [e (eid db j)
                      v (:acct/score (d/entity db e))]
                  {:tx      [[:db/retract e :acct/score v]]
                   :restore [[:db/add e :acct/score v]]})
      "retract-entity" {:tx      [[:db/retractEntity (eid db j)]]
                        :restore [(into {} (account j))]}
      "upsert"  {:tx [{:acct/id      j
                       :acct/name    (str "up-" k)
                       :acct/balance (+ 2000000 k)
                       :acct/city    (str "city-up-" k)}
                      [:db/add :db/current-tx :audit/source "bench"]
                      [:db/add :db/current-tx :audit/reason (str "upsert " k)]]})))

(defn measure
  "Measurement k of a shape in a round on conn (n accounts): [µs tx-data-count]."
  [conn n {:strs [name offset]} round k]
  (let [{:keys [tx restore]} (shape-tx name (long offset) k (long (round "value_offset"))
                                       n (d/db conn))
        start  (System/nanoTime)
        report (d/transact! conn tx)
        us     (/ (- (System/nanoTime) start) 1e3)]
    (when restore (d/transact! conn restore))
    [us (count (:tx-data report))]))

(defn env-flags [conn]
  (try
    (let [store (.-store ^datalevin.db.DB (d/db conn))]
      (mapv name (sort (d/get-env-flags (.-lmdb ^datalevin.storage.Store store)))))
    (catch Throwable t [(str "unknown: " (.getMessage t))])))

(let [[conn ms] (build-conn (str (io/file root "jvm-warmup")) jvm-warmup-entities)]
  (emit {"engine"       "datalevin"
         "version"      dc/version
         "java_version" (System/getProperty "java.version")
         "env_flags"    (env-flags conn)})
  (log (format "JVM warm-up: %d transactions of each shape on %d accounts (built in %.0f ms)"
               jvm-warmup jvm-warmup-entities ms))
  (doseq [shape shapes k (range jvm-warmup)]
    (measure conn jvm-warmup-entities shape (first rounds) k))
  (d/close conn))

(def conns
  (vec (for [size (spec "sizes")]
         (let [n         (long (size "entities"))
               _         (log (format "building %d accounts" n))
               [conn ms] (build-conn (str (io/file root (str "accounts-" n))) n)]
           (log (format "built %d accounts in %.0f ms" n ms))
           (emit {"entities" n "build_ms" ms})
           [n conn]))))

;; Per shape, each round: measurement k runs on each size in turn, as on Vev's side.
(defn run-round [shape round]
  (let [results (reduce (fn [acc k]
                          (reduce (fn [acc [n conn]]
                                    (let [[us cnt] (measure conn n shape round k)]
                                      (if (>= k warmup)
                                        (-> acc
                                            (update-in [n :samples] conj us)
                                            (update-in [n :counts] conj cnt))
                                        acc)))
                                  acc conns))
                        (into {} (for [[n _] conns] [n {:samples [] :counts #{}}]))
                        (range (+ warmup measurements)))]
    (doseq [[n _] conns]
      (let [{:keys [samples counts]} (results n)]
        (emit {"entities"   n
               "shape"      (shape "name")
               "round"      (round "name")
               "datoms"     (vec (sort counts))
               "samples_us" samples})))))

(doseq [shape shapes round rounds]
  (log "measuring" (shape "name") (round "name"))
  (run-round shape round))

(doseq [[_ conn] conns] (d/close conn))
(shutdown-agents)
(System/exit 0)
