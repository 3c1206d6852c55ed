;;; parley-version-test.el --- A server of another version is said once  -*- lexical-binding: t; -*-

;;; Commentary:

;; After `initialize', the server's `agentInfo.version' is compared
;; with `parley-version' (README.md, "Releasing": one version): when they
;; differ it is said once per server version, in the echo area and as
;; a notice line in the chat buffer that uses the server first;
;; nothing when the agent names no version, or is not Parley.  Here
;; with the `initialize' answers parsed from JSON as jsonrpc.el does;
;; against the real server in parley-integration-retry-test.el.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'parley)
(require 'parley-test)

(defmacro parley-version-test--recording (&rest body)
  "Run BODY with `said' returning the messages shown since, oldest first.
The version state starts empty and is restored afterwards."
  (declare (indent 0) (debug t))
  `(let ((parley--version-said nil)
         (parley--version-notice nil)
         (messages nil))
     (cl-flet ((record (format-string &rest args)
                 (when format-string
                   (push (apply #'format-message format-string args) messages)))
               (said () (reverse messages)))
       (advice-add 'message :before #'record)
       (unwind-protect (progn ,@body)
         (advice-remove 'message #'record)))))

(defun parley-version-test--initialize (agent-info)
  "Return an `initialize' answer whose agentInfo is the JSON AGENT-INFO (or none)."
  (parley-test--json (format "{\"protocolVersion\":1,\"agentCapabilities\":{}%s}"
                             (if agent-info (concat ",\"agentInfo\":" agent-info) ""))))

(defun parley-version-test--notices ()
  "Return the version notices in the current chat buffer's transcript."
  (let ((text (parley-test--transcript)) found (start 0))
    (while (string-match "^Parley server .*$" text start)
      (push (match-string 0 text) found)
      (setq start (match-end 0)))
    (nreverse found)))

(ert-deftest parley-version-difference-said-once ()
  (let ((parley-version "0.2.0")
        (expected "Parley server 0.1.0 differs from parley.el 0.2.0: update the server (M-x parley-install-server) or the package."))
    (parley-version-test--recording
      (parley--check-server-version
       (parley-version-test--initialize "{\"name\":\"parley\",\"version\":\"0.1.0\"}"))
      (should (equal (said) (list expected)))
      ;; The chat buffer that uses the server first shows it, as a warning.
      (parley-test--with-chat
        (should (equal (parley-version-test--notices) (list expected)))
        (should (eq (get-text-property (parley-test--pos "Parley server") 'face)
                    'parley-warning))
        ;; Not a second session's buffer.
        (let ((second (parley--make-buffer temporary-file-directory "sess-second")))
          (unwind-protect
              (with-current-buffer second
                (should-not (parley-version-test--notices)))
            (kill-buffer second))))
      ;; A server of the same version again (a restart): nothing more.
      (parley--check-server-version
       (parley-version-test--initialize "{\"name\":\"parley\",\"version\":\"0.1.0\"}"))
      (should (= (length (said)) 1))
      (parley-test--with-chat
        (should-not (parley-version-test--notices)))
      ;; A server of this version: nothing; then another one differs again.
      (parley--check-server-version
       (parley-version-test--initialize "{\"name\":\"parley\",\"version\":\"0.2.0\"}"))
      (should (= (length (said)) 1))
      (parley--check-server-version
       (parley-version-test--initialize "{\"name\":\"parley\",\"version\":\"0.3.0\"}"))
      (should (equal (car (last (said)))
                     "Parley server 0.3.0 differs from parley.el 0.2.0: update the server (M-x parley-install-server) or the package.")))))

(ert-deftest parley-version-unknown-says-nothing ()
  ;; Another ACP agent, or an answer without a version: nothing said.
  (let ((parley-version "0.2.0"))
    (dolist (agent-info '(nil "{}" "{\"name\":\"parley\"}" "{\"name\":\"parley\",\"version\":null}"
                              "{\"name\":\"parley\",\"version\":\"\"}" "{\"name\":\"parley\",\"version\":\"  \"}"
                              "{\"name\":\"parley\",\"version\":42}" "{\"name\":\"parley\",\"version\":false}"
                              "{\"name\":\"other-agent\",\"version\":\"1.4.2\"}" "{\"version\":\"1.4.2\"}"
                              "\"parley 0.1.0\"" "[\"parley\",\"0.1.0\"]"))
      (parley-version-test--recording
        (parley--check-server-version (parley-version-test--initialize agent-info))
        (should-not (said))
        (parley-test--with-chat
          (should-not (parley-version-test--notices)))))))

(ert-deftest parley-version-property-any-string-one-line ()
  ;; Property: whatever string the server names as its version, the
  ;; difference is said once, on one line, naming both versions.
  (random "parley-version-property")    ; the same cases each run
  (let ((parley-version "0.2.0")
        (alphabet (vconcat "0123456789.-+abcXYZ %s%d%%\\\"'`\n\r\t\0\e" "éλ中😀\u200b\u00a0")))
    (dotimes (_ 200)
      (let ((version (apply #'string (cl-loop repeat (random 90)
                                              collect (aref alphabet (random (length alphabet)))))))
        (parley-version-test--recording
          (parley--check-server-version
           (list :agentInfo (list :name "parley" :version version)))
          (if (or (string-empty-p (string-trim version)) (equal version parley-version))
              (should-not (said))
            (let ((line (car (said))))
              (should (= (length (said)) 1))
              (should-not (string-match-p "[\n\r\0]" line))
              (should (string-prefix-p "Parley server " line))
              (should (string-suffix-p " differs from parley.el 0.2.0: update the server (M-x parley-install-server) or the package." line))
              (should (<= (length line) 200))
              (parley-test--with-chat
                (should (equal (parley-version-test--notices) (list line)))))))))))

(provide 'parley-version-test)
;;; parley-version-test.el ends here
