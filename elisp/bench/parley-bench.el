;;; parley-bench.el --- Streaming benchmark for parley.el  -*- lexical-binding: t; -*-

;;; Commentary:

;; emacs --batch -L elisp -l elisp/bench/parley-bench.el -f parley-bench-main
;;
;; Streams N chunks (default 20,000; PARLEY_BENCH_CHUNKS) of an answer
;; into one chat buffer and reports the time per chunk over the first
;; and the last tenth, and the total, against a bare jsonrpc.el loop
;; that consumes the same stream and inserts nothing.  Two sources:
;;
;;   replay  the session/update messages, framed, piped in by `cat':
;;           nothing but Emacs is measured.
;;   server  `parley serve' answering a prompt from the fake LLM (runs
;;           when the server is installed in $PARLEY_VENV or .venv).
;;
;; "wall" is the time between chunk arrivals; "insert" the time spent
;; in the chat buffer's handler for the chunk (parsing is jsonrpc.el's).

;;; Code:

(require 'cl-lib)
(require 'jsonrpc)
(require 'url)
(require 'parley)
(require 'parley-test-env
         (expand-file-name "../test/parley-test-env"
                           (file-name-directory (or load-file-name buffer-file-name))))

(defvar parley-bench-chunks
  (string-to-number (or (getenv "PARLEY_BENCH_CHUNKS") "20000"))
  "How many chunks to stream.")

(defconst parley-bench--chunk "abc "
  "The text of one chunk (the fake LLM's default chunk size is 4).")

(cl-defstruct (parley-bench--run (:constructor parley-bench--run-create))
  "Timings of one run: ARRIVALS and HANDLER times per chunk, COUNT, TOTAL.
GCS and GC-SECONDS: the garbage collections during the run."
  name (count 0) arrivals handler total (chars 0) gcs gc-seconds)

(defmacro parley-bench--gc-counted (&rest body)
  "Run BODY, which returns a run, and record its garbage collections."
  (declare (indent 0))
  `(let ((gcs gcs-done) (elapsed gc-elapsed))
     (garbage-collect)
     (setq gcs gcs-done elapsed gc-elapsed)
     (let ((run (progn ,@body)))
       (setf (parley-bench--run-gcs run) (- gcs-done gcs)
             (parley-bench--run-gc-seconds run) (- gc-elapsed elapsed))
       run)))

(defun parley-bench--new (name)
  "Return an empty run called NAME."
  (parley-bench--run-create
   :name name
   :arrivals (make-vector parley-bench-chunks 0.0)
   :handler (make-vector parley-bench-chunks 0.0)))

(defun parley-bench--record (run t0 t1)
  "Record in RUN a chunk that arrived at T0 and was handled by T1."
  (let ((i (parley-bench--run-count run)))
    (when (< i parley-bench-chunks)
      (aset (parley-bench--run-arrivals run) i t0)
      (aset (parley-bench--run-handler run) i (- t1 t0))
      (setf (parley-bench--run-count run) (1+ i)))))

(defun parley-bench--wait (predicate &optional timeout)
  "Wait until PREDICATE holds, at most TIMEOUT seconds (default 300)."
  (let ((deadline (+ (float-time) (or timeout 300))))
    (while (and (not (funcall predicate)) (< (float-time) deadline))
      (accept-process-output nil 0.05))
    (or (funcall predicate) (error "Benchmark timed out"))))

(defun parley-bench--update-json (i &optional text)
  "Return the framed session/update message of chunk I, of TEXT (default \"abc \")."
  (let ((json (json-serialize
               (list :jsonrpc "2.0" :method "session/update"
                     :params (list :sessionId "bench"
                                   :update (list :sessionUpdate "agent_message_chunk"
                                                 :content (list :type "text"
                                                                :text (or text parley-bench--chunk))
                                                 :messageId (if (< i 0) "m0" "m1")))))))
    (encode-coding-string
     (format "Content-Length: %d\r\n\r\n%s" (string-bytes json) json) 'utf-8)))

(defconst parley-bench--markdown
  "## Step %d\nRun `make test` with **care** and *attention*, see [the docs](https://example.com/docs).\n\
- an item with `code`\n- another item\n```python\ndef double(x):\n    return x * 2  # twice\n```\n\
Plain prose that goes on for a while before its line ends.\n\n"
  "One section of the Markdown answer the Markdown row streams (%d: its number).")

(defun parley-bench--markdown-chunks ()
  "Return `parley-bench-chunks' chunks of 6 characters of a long Markdown answer."
  (let ((text (with-temp-buffer
                (let ((i 0))
                  (while (< (buffer-size) (* 6 parley-bench-chunks))
                    (insert (format parley-bench--markdown (cl-incf i)))))
                (buffer-string))))
    (cl-loop for i below parley-bench-chunks
             collect (substring text (* 6 i) (* 6 (1+ i))))))

(defun parley-bench--write-stream (&optional chunks)
  "Write the framed stream of `parley-bench-chunks' updates; return the file.
CHUNKS are the texts of the chunks; by default each is \"abc \"."
  (let ((file (make-temp-file "parley-bench-stream-")))
    (with-temp-file file
      (set-buffer-multibyte nil)
      (if chunks
          (dolist (chunk chunks) (insert (parley-bench--update-json 1 chunk)))
        (let ((one (parley-bench--update-json 1)))
          (dotimes (_ parley-bench-chunks) (insert one)))))
    file))

(defvar parley-bench--fontified nil
  "What the Markdown row fontified: (HEADINGS . CODE-BLOCKS), counted at its end.")

(defun parley-bench--count-fontified ()
  "Count the headings and code blocks fontified in the current buffer."
  (let ((headings 0) (blocks 0) (pos (point-min)))
    (while (< pos (point-max))
      (let ((next (next-single-property-change pos 'face nil (point-max))))
        (when (eq (get-text-property pos 'face) 'parley-markdown-heading)
          (cl-incf headings))
        (setq pos next)))
    (setq pos (point-min))
    (while (< pos (point-max))
      (let ((next (next-single-property-change pos 'parley-code nil (point-max))))
        (when (get-text-property pos 'parley-code) (cl-incf blocks))
        (setq pos next)))
    (cons headings blocks)))

(defun parley-bench--connection (name command dispatcher)
  "Return a jsonrpc connection NAME running COMMAND; DISPATCHER gets notifications."
  (make-instance
   'parley--rpc-connection
   :name name
   :process (lambda ()
              (make-process :name name :command command :connection-type 'pipe
                            :coding 'utf-8-emacs-unix :noquery t
                            :stderr (get-buffer-create (format "*%s stderr*" name))))
   :notification-dispatcher dispatcher
   :request-dispatcher #'parley--handle-request
   :on-shutdown #'ignore
   (car (parley--events-initargs)) (cadr (parley--events-initargs))))

(defun parley-bench--replay (file with-buffer &optional name)
  "Consume the stream in FILE, into a chat buffer when WITH-BUFFER.
NAME names the consumer in the table."
  (let* ((run (parley-bench--new (or name (if with-buffer "parley buffer" "bare jsonrpc loop"))))
         (buffer (and with-buffer (parley--make-buffer temporary-file-directory "bench")))
         (dispatcher
          (if with-buffer
              (lambda (conn method params)
                (let ((t0 (float-time)))
                  (parley--handle-notification conn method params)
                  (parley-bench--record run t0 (float-time))))
            (lambda (_conn _method _params)
              (let ((t0 (float-time)))
                (parley-bench--record run t0 t0)))))
         (start (float-time))
         (conn (parley-bench--connection "parley-bench-replay" (list "cat" file) dispatcher)))
    (when buffer
      (set-window-buffer (selected-window) buffer)
      (with-current-buffer buffer (goto-char (point-max))))
    (parley-bench--wait (lambda () (>= (parley-bench--run-count run) parley-bench-chunks)))
    (setf (parley-bench--run-total run) (- (float-time) start))
    (when buffer
      (setf (parley-bench--run-chars run) (buffer-size buffer))
      (with-current-buffer buffer
        (parley--end-turn-state)
        (setq parley-bench--fontified (parley-bench--count-fontified)))
      (kill-buffer buffer))
    (ignore-errors (jsonrpc-shutdown conn))
    run))

;;;; Against the server

(defvar parley-bench--fake-url nil
  "The fake LLM's URL.")

(defun parley-bench--start-fake ()
  "Start the fake LLM with a script of one long answer."
  (setq parley-bench--fake-url (cdr (parley-test-env-start-fake "parley-bench-fake")))
  (let ((url-request-method "POST")
        (url-request-extra-headers '(("Content-Type" . "application/json")))
        (url-request-data
         (json-serialize
          (vector (list :text (apply #'concat (make-list parley-bench-chunks
                                                         parley-bench--chunk))
                        :chunk_size (length parley-bench--chunk))))))
    (kill-buffer (url-retrieve-synchronously
                  (concat parley-bench--fake-url "/_fake/script") t t 30))))

(defvar parley-bench--homes nil
  "The PARLEY_HOME directories the benchmark made, deleted at exit.")

(defun parley-bench--server-env ()
  "Return the environment for `parley serve' against the fake LLM."
  (let ((home (make-temp-file "parley-bench-home-" t)))
    (push home parley-bench--homes)
    (parley-test-env-server-environment parley-bench--fake-url home)))

(add-hook 'kill-emacs-hook
          (lambda () (dolist (home parley-bench--homes) (delete-directory home t))))

(defun parley-bench--server-parley ()
  "Stream the scripted answer from the server into a chat buffer."
  (let* ((run (parley-bench--new "parley buffer"))
         (parley-server-command (list parley-test-env-parley "serve"))
         (parley-server-environment (parley-bench--server-env))
         (default-directory temporary-file-directory)
         (advice (lambda (orig update)
                   (let ((t0 (float-time)))
                     (funcall orig update)
                     (when (equal (plist-get update :sessionUpdate) "agent_message_chunk")
                       (parley-bench--record run t0 (float-time)))))))
    (advice-add 'parley--update :around advice)
    (unwind-protect
        (let ((buffer (parley t)))
          (set-window-buffer (selected-window) buffer)
          (with-current-buffer buffer
            (goto-char (point-max))
            (insert "Stream the long answer")
            (let ((start (float-time)))
              (parley-send)
              (parley-bench--wait (lambda () (not parley--busy)))
              (setf (parley-bench--run-total run) (- (float-time) start)
                    (parley-bench--run-chars run) (buffer-size)))))
      (advice-remove 'parley--update advice)
      (parley-shutdown))
    run))

(defun parley-bench--server-bare ()
  "Stream the scripted answer from the server into a bare jsonrpc loop."
  (let* ((run (parley-bench--new "bare jsonrpc loop"))
         (process-environment (append (parley-bench--server-env) process-environment))
         (conn (parley-bench--connection
                "parley-bench-bare"
                (list parley-test-env-parley "serve")
                (lambda (_conn _method params)
                  (when (equal (plist-get (plist-get params :update) :sessionUpdate)
                               "agent_message_chunk")
                    (let ((t0 (float-time)))
                      (parley-bench--record run t0 t0))))))
         done)
    (unwind-protect
        (progn
          (jsonrpc-request conn 'initialize '(:protocolVersion 1 :clientCapabilities (:fs nil))
                           :timeout 60)
          (let* ((session (plist-get (jsonrpc-request
                                      conn 'session/new
                                      (list :cwd (directory-file-name temporary-file-directory)
                                            :mcpServers [])
                                      :timeout 60)
                                     :sessionId))
                 (start (float-time)))
            (jsonrpc-async-request conn 'session/prompt
                                   (list :sessionId session
                                         :prompt [(:type "text" :text "Stream the long answer")])
                                   :timeout 300
                                   :success-fn (lambda (_) (setq done t))
                                   :error-fn (lambda (e) (setq done e)))
            (parley-bench--wait (lambda () done))
            (setf (parley-bench--run-total run) (- (float-time) start))))
      (ignore-errors (process-send-eof (jsonrpc--process conn)))
      (ignore-errors (jsonrpc-shutdown conn)))
    run))

;;;; Report

(defun parley-bench--tenth-us (vector count from-end handler &optional median)
  "Mean (or MEDIAN) µs per chunk over a tenth of COUNT entries of VECTOR.
FROM-END picks the last tenth.  HANDLER means VECTOR holds durations;
otherwise it holds arrival times and the spacing is averaged."
  (let* ((n (max 2 (/ count 10)))
         (start (if from-end (- count n) 0)))
    (cond ((and handler median)
           (* 1e6 (nth (/ n 2) (sort (cl-loop for i from start below (+ start n)
                                              collect (aref vector i))
                                     #'<))))
          (handler
           (/ (* 1e6 (cl-loop for i from start below (+ start n) sum (aref vector i))) n))
          (t (/ (* 1e6 (- (aref vector (+ start n -1)) (aref vector start))) (1- n))))))

(defun parley-bench--row (source run)
  "Return the table row of RUN streamed from SOURCE."
  (let ((count (parley-bench--run-count run))
        (bare (string-prefix-p "bare" (parley-bench--run-name run))))
    (cl-flet ((insert-us (from-end)
                (if bare "-"
                  (format "%.1f / %.1f"
                          (parley-bench--tenth-us (parley-bench--run-handler run)
                                                  count from-end t t)
                          (parley-bench--tenth-us (parley-bench--run-handler run)
                                                  count from-end t)))))
      (format "| %s | %s | %d | %.1f | %.1f | %s | %s | %.2f | %.2f (%d) | %s |"
              source (parley-bench--run-name run) count
              (parley-bench--tenth-us (parley-bench--run-arrivals run) count nil nil)
              (parley-bench--tenth-us (parley-bench--run-arrivals run) count t nil)
              (insert-us nil) (insert-us t)
              (parley-bench--run-total run)
              (parley-bench--run-gc-seconds run) (parley-bench--run-gcs run)
              (if bare "-" (number-to-string (parley-bench--run-chars run)))))))

(defun parley-bench-main ()
  "Run the benchmark and print its table."
  (let ((file (parley-bench--write-stream))
        rows)
    (unwind-protect
        (progn
          ;; A warm-up, so that neither side pays for loading code.
          (let* ((parley-bench-chunks 500)
                 (warm-up (parley-bench--write-stream))
                 (markdown (parley-bench--write-stream (parley-bench--markdown-chunks))))
            (parley-bench--replay warm-up t)
            ;; This one loads python-mode, which the Markdown row then uses.
            (parley-bench--replay markdown t)
            (delete-file warm-up)
            (delete-file markdown))
          (push (cons "replay" (parley-bench--gc-counted (parley-bench--replay file nil))) rows)
          (push (cons "replay" (parley-bench--gc-counted (parley-bench--replay file t))) rows))
      (delete-file file))
    ;; Markdown fontified as it streams: every completed line, code
    ;; blocks in python-mode once closed.
    (let ((markdown (parley-bench--write-stream (parley-bench--markdown-chunks))))
      (unwind-protect
          (let ((parley-fontify-markdown t))
            (push (cons "replay" (parley-bench--gc-counted
                                  (parley-bench--replay markdown t
                                                        "parley buffer, Markdown fontified")))
                  rows))
        (delete-file markdown)))
    (if (parley-test-env-missing)
        (message "(server runs skipped: %s)" (parley-test-env-missing))
      (parley-bench--start-fake)
      (push (cons "server" (parley-bench--gc-counted (parley-bench--server-bare))) rows)
      (push (cons "server" (parley-bench--gc-counted (parley-bench--server-parley))) rows))
    (princ (format "Streaming %d chunks of %S into one buffer (Emacs %s, jsonrpc.el %s)\n\n"
                   parley-bench-chunks parley-bench--chunk emacs-version
                   (or (ignore-errors
                         (with-temp-buffer
                           (insert-file-contents (find-library-name "jsonrpc"))
                           (and (re-search-forward "^;; Version: \\(.*\\)$" nil t)
                                (match-string 1))))
                       "?")))
    (princ "| source | consumer | chunks | wall µs/chunk, first 10% | wall µs/chunk, last 10% | insert µs/chunk, first 10% (median / mean) | insert µs/chunk, last 10% (median / mean) | total s | GC s (count) | buffer chars |\n")
    (princ "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|\n")
    (dolist (row (nreverse rows))
      (princ (concat (parley-bench--row (car row) (cdr row)) "\n")))
    (princ (format "\nMarkdown row: chunks of 6 characters of a Markdown answer (headings, emphasis,
inline code, links, lists, a Python block per section); %d headings and %d code blocks were
fontified while it streamed.\n" (car parley-bench--fontified) (cdr parley-bench--fontified)))
    (princ "\nwall: time between chunk arrivals (jsonrpc.el parsing included); insert: time in
the chat buffer's handler for a chunk; a garbage collection that lands in the handler shows
in the mean, not the median.  replay: the framed updates piped in by `cat' (Emacs alone);
server: `parley serve' streaming from the fake LLM.\n")))

(provide 'parley-bench)
;;; parley-bench.el ends here
