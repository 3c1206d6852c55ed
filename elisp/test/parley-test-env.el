;;; parley-test-env.el --- The server and the fake LLM for tests and benchmarks  -*- lexical-binding: t; -*-

;;; Commentary:

;; What the integration tests and the streaming benchmark share: where
;; `parley serve' and the fake LLM (`python -m parley.fakellm') are
;; installed ($PARLEY_VENV, or the .venv of the repository), whether
;; they can run, starting the fake LLM, and the environment that points
;; a server at it.

;;; Code:

(defconst parley-test-env-repo
  (file-name-directory
   (directory-file-name
    (file-name-directory
     (directory-file-name
      (file-name-directory (or load-file-name buffer-file-name))))))
  "The repository (this file is in its elisp/test).")

(defconst parley-test-env-venv
  (file-name-as-directory
   (or (getenv "PARLEY_VENV") (expand-file-name ".venv" parley-test-env-repo)))
  "The virtualenv holding the server.")

(defconst parley-test-env-parley (expand-file-name "bin/parley" parley-test-env-venv)
  "The server executable.")

(defconst parley-test-env-python (expand-file-name "bin/python" parley-test-env-venv)
  "The virtualenv's Python, which runs the fake LLM.")

(defun parley-test-env-missing ()
  "Return why the server or the fake LLM cannot run, or nil when they can."
  (cond
   ((not (file-executable-p parley-test-env-parley))
    (format "parley serve is not installed yet (no %s)" parley-test-env-parley))
   ((not (zerop (call-process parley-test-env-parley nil nil nil "serve" "--help")))
    (format "%s serve --help fails: the server is not usable yet" parley-test-env-parley))
   ((not (zerop (call-process parley-test-env-python nil nil nil
                              "-c" "import parley.fakellm.__main__")))
    "the fake LLM (parley.fakellm) is not installed yet")))

(defun parley-test-env-start-fake (name)
  "Start the fake LLM as the process NAME; return (PROCESS . URL).
Wait up to 30 seconds for it to say its URL; signal an error if not."
  (let* ((buffer (with-current-buffer (get-buffer-create (format " *%s*" name))
                   (erase-buffer)
                   (current-buffer)))
         (stderr (get-buffer-create (format " *%s stderr*" name)))
         (process (make-process :name name :buffer buffer
                                :command (list parley-test-env-python "-m" "parley.fakellm"
                                               "--exit-on-stdin-eof")
                                :connection-type 'pipe :noquery t :stderr stderr))
         (deadline (+ (float-time) 30))
         url)
    (while (and (not (setq url (with-current-buffer buffer
                                 (goto-char (point-min))
                                 (and (re-search-forward "^\\(http://[^\n]+\\)\n" nil t)
                                      (match-string 1)))))
                (process-live-p process)
                (< (float-time) deadline))
      (accept-process-output process 0.05))
    (unless url
      (error "The fake LLM did not say its URL: %s"
             (with-current-buffer stderr (buffer-string))))
    (cons process url)))

(defun parley-test-env-server-environment (url home)
  "Return the environment of a server using the fake LLM at URL and the store HOME."
  (list (concat "OPENAI_BASE_URL=" url "/v1")
        "OPENAI_API_KEY=test-key"
        "PARLEY_MODEL=openai:gpt-4.1-mini"
        (concat "PARLEY_HOME=" home)))

(provide 'parley-test-env)
;;; parley-test-env.el ends here
