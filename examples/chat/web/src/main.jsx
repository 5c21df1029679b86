// The example's chat page: the AI SDK's useChat on helix-dbos's chat routes.
// The chat id (the session id) lives in the URL's hash, so a reload resumes the same chat;
// the messages are kept in localStorage, and resume: true replays the answer in progress.
import { useChat } from "@ai-sdk/react";
import {
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
} from "ai";
import { useEffect, useState } from "react";
import { createRoot } from "react-dom/client";

if (!location.hash.slice(1)) location.hash = crypto.randomUUID(); // the assignment adds the "#"
const chatId = location.hash.slice(1);
const saved = JSON.parse(localStorage.getItem(`chat:${chatId}`) ?? "[]");

// The AI SDK's tool part states, as a person reads them.
const TOOL_STATES = {
  "input-streaming": "preparing",
  "input-available": "running",
  "approval-requested": "waiting for your approval",
  "approval-responded": "answered",
  "output-available": "done",
  "output-error": "failed",
  "output-denied": "declined",
};

// A value in words: "order_id A-42, amount 20" for an object, "A-42, B-7" for a list.
function readable(value) {
  if (Array.isArray(value)) return value.map(readable).join(", ");
  if (value && typeof value === "object") return Object.entries(value).map(([k, v]) => `${k.replaceAll("_", " ")} ${readable(v)}`).join(", ");
  return String(value ?? "");
}

function ToolPart({ part, onAnswer }) {
  return (
    <div className="tool">
      <b>{part.type.slice(5)}</b> <span className="tool-input">{readable(part.input)}</span>
      {" "}<i className="tool-state">{TOOL_STATES[part.state] ?? part.state}</i>
      {part.state === "approval-requested" && (
        <span>
          {" "}<button className="approve" onClick={() => onAnswer(part.approval.id, true)}>Approve</button>
          {" "}<button className="deny" onClick={() => onAnswer(part.approval.id, false)}>Deny</button>
        </span>
      )}
      {part.state === "output-available" && <div className="tool-output">{readable(part.output)}</div>}
      {part.state === "output-error" && <div className="tool-output">{part.errorText}</div>}
    </div>
  );
}

function Chat() {
  const [input, setInput] = useState("");
  const { messages, sendMessage, addToolApprovalResponse, status, error } = useChat({
    id: chatId,
    messages: saved,
    resume: true,
    transport: new DefaultChatTransport({ api: "/agents/chat" }),
    sendAutomaticallyWhen: (options) =>
      lastAssistantMessageIsCompleteWithToolCalls(options) || lastAssistantMessageIsCompleteWithApprovalResponses(options),
  });
  useEffect(() => localStorage.setItem(`chat:${chatId}`, JSON.stringify(messages)), [messages]);
  const answer = (id, approved) => addToolApprovalResponse({ id, approved, reason: approved ? undefined : "declined" });
  return (
    <div>
      {messages.map((message) => (
        <div key={message.id} className={`message ${message.role}`}>
          {message.parts.map((part, i) => {
            if (part.type === "text") return <p key={i} className="text">{part.text}</p>;
            if (part.type.startsWith("tool-")) return <ToolPart key={i} part={part} onAnswer={answer} />;
            if (part.type === "data-state") return <div key={i} className="state">state: {readable(part.data)}</div>;
            return null;
          })}
        </div>
      ))}
      {error && <p className="error">{error.message}</p>}
      <form onSubmit={(e) => { e.preventDefault(); if (input) { sendMessage({ text: input }); setInput(""); } }}>
        <input id="input" value={input} onChange={(e) => setInput(e.target.value)} placeholder="Ask support..." />
        <button id="send" disabled={status === "streaming" || status === "submitted"}>Send</button>
      </form>
    </div>
  );
}

createRoot(document.getElementById("root")).render(<Chat />);
