"""The pages' words in English and Chinese, the two languages memory speaks.

Stored text is never translated: a Chinese fact shows as it was written, whatever the
page's language. The language comes from `?lang=`, then a cookie, then the browser's
Accept-Language.
"""

from __future__ import annotations

from collections.abc import Callable

LANGS: tuple[str, ...] = ("en", "zh")

# key -> (English, 中文). `{name}` fields are filled by `translator`.
WORDS: dict[str, tuple[str, str]] = {
    "title": ("Memory", "记忆"),
    "users": ("Users", "用户"),
    "store": ("Store", "存储"),
    "dead_letters": ("Dead letters", "死信"),
    "log_out": ("Log out", "退出"),
    "log_in": ("Log in", "登录"),
    "secret": ("Operator's secret (MEMORY_WEB_SECRET)", "运维密钥（MEMORY_WEB_SECRET）"),
    "wrong_secret": ("That is not the secret.", "密钥不正确。"),
    "too_many": ("Too many wrong attempts: wait a minute.", "错误次数过多，请稍等一分钟。"),
    "store_down": (
        "The memory store cannot be reached (the database is down or refuses connections). Nothing was changed; "
        "reload once it is back.",
        "无法连接记忆存储（数据库已停止或拒绝连接）。没有做任何更改；恢复后请刷新。",
    ),
    "server_error": (
        "Something went wrong on the server (its log says what). Nothing else was changed.",
        "服务器出错（详见其日志）。未做其他更改。",
    ),
    "mode": ("This server's mode", "本服务器的模式"),
    "stored_under": ("Stored under", "存储时的模式"),
    "search_identity": ("Search by identity", "按身份搜索"),
    "search": ("Search", "搜索"),
    "user": ("User", "用户"),
    # The places that hold a user's data (memory/userdata.py), by their one name, and
    # what their rows are made of: every page shows these counts under these words.
    "memories": ("memories", "记忆"),
    "raw_turns": ("turns (NORMAL)", "对话轮次（NORMAL）"),
    "facts": ("facts (GATED)", "事实（GATED）"),
    "mem0_history": ("Mem0 history (this machine)", "Mem0 历史（本机）"),
    "archive": ("archive (messages and summaries)", "存档（消息与摘要）"),
    "calls": ("calls", "通话"),
    "messages": ("messages", "消息"),
    "summaries": ("summaries", "摘要"),
    "shared_contexts": ("shared contexts", "共享上下文"),
    "densities": ("memory densities", "记忆密度"),
    "spilled": ("spill files (this machine)", "溢出文件（本机）"),
    "journal": ("journal (this machine)", "日志（本机）"),
    "last_activity": ("Last activity", "最近活动"),
    "no_users": ("No user matches.", "没有匹配的用户。"),
    "page": ("Page {n} of {of}", "第 {n} 页，共 {of} 页"),
    "previous": ("Previous", "上一页"),
    "next": ("Next", "下一页"),
    "recall": ("What would it recall?", "它会想起什么？"),
    "export": ("Export (JSON)", "导出（JSON）"),
    "forget": ("Forget this user…", "遗忘此用户…"),
    "facts_by_category": ("Facts by category (GATED)", "按类别的事实（GATED）"),
    "no_facts": ("No facts.", "没有事实。"),
    "fact": ("Fact", "事实"),
    "category:relationships": ("Relationships", "人际关系"),
    "category:preferences": ("Preferences", "偏好"),
    "category:goals": ("Goals", "目标"),
    "category:personal_facts": ("Personal facts", "个人信息"),
    "slot": ("Slot", "槽位"),
    "updated": ("Updated", "更新于"),
    "history": ("History", "历史"),
    "replaced": ("“{old}” became “{new}”", "“{old}”改为“{new}”"),
    "added": ("added as “{new}”", "新增为“{new}”"),
    "deleted": ("deleted", "已删除"),
    "turns_by_call": ("Turns by call (NORMAL)", "按通话的对话轮次（NORMAL）"),
    "no_turns": ("No turns.", "没有对话轮次。"),
    "call": ("Call", "通话"),
    "text": ("Text", "内容"),
    "calls_heading": ("Calls in the archive", "存档中的通话"),
    "no_calls": ("No archived calls.", "没有存档的通话。"),
    "call_of": ("Call of {began}", "{began} 的通话"),
    "under_a_minute": ("under a minute", "不到一分钟"),
    "n_minutes": ("{n} minutes", "{n} 分钟"),
    "n_minutes_one": ("1 minute", "1 分钟"),
    "n_turns": ("{n} turns", "{n} 轮"),
    "n_turns_one": ("1 turn", "1 轮"),
    "n_messages": ("{n} messages", "{n} 条消息"),
    "n_messages_one": ("1 message", "1 条消息"),
    "n_summaries": ("{n} summaries", "{n} 条摘要"),
    "n_summaries_one": ("1 summary", "1 条摘要"),
    "summary": ("Summary", "摘要"),
    "show_messages": ("Messages", "消息"),
    "more_messages": ("… and more: the export has them all.", "……更多内容见导出文件。"),
    "summarised": ("summarised", "已摘要"),
    "contexts": ("Shared contexts", "共享上下文"),
    "no_contexts": ("No shared contexts.", "没有共享上下文。"),
    "created_by": ("created by {agent}", "由 {agent} 创建"),
    "journal_heading": ("Waiting in this machine's journal", "本机日志中等待写入"),
    "journal_empty": ("Nothing waiting.", "没有等待写入的内容。"),
    "state": ("State", "状态"),
    "kind": ("Kind", "种类"),
    "attempts": ("Attempts", "尝试次数"),
    "error": ("Error", "错误"),
    "query": ("Message", "消息"),
    "recall_help": (
        "Type a message as the user would say it: the list is what the agent's reply would get, ranked as it "
        "ranks them. Fused (0–1, above 0.75 compressed towards 1) ranks them: the lexical score (the share of the "
        "message's keywords found) and the vector score (the similarity, on the embedder's band) with what the "
        "conversation, the days and the turns around add; a turn that only asks, or only repeats the message, keeps "
        "a part of it. Cosine is the plain similarity (−1–1).",
        "像用户那样输入一句话：下面列出的就是智能体回复时会得到的记忆，按它的排序方式排列。"
        "融合分（0–1，0.75 以上向 1 压缩）决定排序：词汇分（找到的关键词所占比例）与向量分（嵌入模型区间内的相似度），"
        "加上对话、日期和相邻轮次的加分；只是提问、或只是重复这句话的轮次只保留其中一部分。余弦是原始相似度（−1–1）。",
    ),
    "ask": ("Recall", "检索"),
    "would_not_look_up": (
        "GATED: the agent would not look memory up for this message (it does not ask about the user). "
        "Shown: what it would find if it did.",
        "GATED：对于这句话，智能体不会检索记忆（它没有询问用户相关的事）。下面是假如检索时的结果。",
    ),
    "recalled": ("Recalled, as the reply gets them", "检索到的记忆（回复所得）"),
    "nothing_recalled": ("Nothing recalled.", "没有检索到记忆。"),
    "rank": ("#", "#"),
    "fused": ("Fused (0–1)", "融合分（0–1）"),
    "lexical": ("Lexical (0–1)", "词汇分（0–1）"),
    "vector": ("Vector (0–1)", "向量分（0–1）"),
    "cosine": ("Cosine (−1–1)", "余弦（−1–1）"),
    "stages": ("Found by", "来源"),
    "category": ("Category", "类别"),
    "cut": ("Considered and left out", "考虑过但被排除"),
    "nothing_cut": ("Nothing else was considered.", "没有其他候选。"),
    "why": ("Why", "原因"),
    "below_threshold": ("below the relevance threshold {threshold}", "低于相关性阈值 {threshold}"),
    "copy": ("a copy of a better-ranked memory", "与排名更高的记忆重复"),
    "acknowledgement": ("a bare acknowledgement", "仅是应答语"),
    "past_top_k": ("{k} better ones came first (MEMORY_TOP_K)", "已有 {k} 条更好的（MEMORY_TOP_K）"),
    "question": ("a question the user asked, beside what the user stated", "用户问过的问题（已有陈述）"),
    "no_look_up": (
        "this message gets no look-up (small talk, or GATED: needs no memory)",
        "此消息不检索记忆（寒暄，或 GATED 模式下无需记忆）",
    ),
    "block": ("The block the model sees", "模型看到的记忆块"),
    "keywords": ("Keywords (weight)", "关键词（权重）"),
    "user_words": (
        "The words that name the user (I, me, you, 我, 你) are read as {words}, as memories about the user are "
        "written, and matched as such.",
        "指代用户的词（我、你、I、you）按 {words} 匹配，与关于用户的记忆写法一致。",
    ),
    "archive_matches": ("Archive matches (similarity ≥ {min})", "存档匹配（相似度 ≥ {min}）"),
    "similarity": ("Similarity (−1–1)", "相似度（−1–1）"),
    "forget_title": ("Forget {user}", "遗忘 {user}"),
    "forget_warning": (
        "This deletes everything kept about this user, on every table, and cannot be undone. Turns of theirs still "
        "on their way are refused when they arrive.",
        "这将删除所有表中关于此用户的一切，无法撤销。仍在途中的该用户对话在到达时会被拒绝。",
    ),
    "will_delete": ("What will be deleted", "将被删除的内容"),
    "type_to_confirm": ("Type the identity to confirm: {user}", "输入该身份以确认：{user}"),
    "forget_button": ("Forget everything about this user", "遗忘关于此用户的一切"),
    "mismatch": (
        "What you typed does not match the identity: nothing was forgotten.",
        "输入的内容与身份不符：没有遗忘任何内容。",
    ),
    "forgotten": ("Forgot {user}", "已遗忘 {user}"),
    "place": ("Place", "位置"),
    "removed": ("Removed", "已删除"),
    "left_now": ("Left now", "现存"),
    "nothing_left": ("Nothing is left in any table.", "所有表中均无残留。"),
    "something_left": ("Something is left: see the table.", "仍有残留：见上表。"),
    "not_done": (
        "Not done: {place} ({why}). Forget again once that is fixed.",
        "未完成：{place}（{why}）。修复后请再遗忘一次。",
    ),
    "unknown_user": (
        "Nothing is stored under {user} (identities are exact: case, spaces and accents count).",
        "{user} 名下没有任何存储（身份需完全一致：大小写、空格与重音均有区别）。",
    ),
    "dead_help": (
        "Turns the store refused for good. Replay puts them back in the queue: a running worker writes them within "
        "about 10 s, else the next one to start.",
        "存储永久拒绝的对话。重放会把它们放回队列：运行中的 worker 约 10 秒内写入，否则由下一个启动的 worker 写入。",
    ),
    "no_dead_letters": ("No dead letters.", "没有死信。"),
    "replay_selected": ("Replay selected", "重放所选"),
    "replay_all": ("Replay all", "全部重放"),
    "replayed": ("{n} back in the queue.", "已有 {n} 条放回队列。"),
    "failed_at": ("Failed at", "失败时间"),
    "turn_id": ("Turn id", "轮次 ID"),
    "over_time": ("The store over time (last {days} days, {zone})", "存储随时间变化（最近 {days} 天，{zone}）"),
    "day": ("Day", "日期"),
    "new_turns": ("Turns stored (NORMAL)", "存入的对话轮次（NORMAL）"),
    "new_facts": ("Facts stored (GATED)", "存入的事实（GATED）"),
    "recalls": ("Replies that recalled", "检索过记忆的回复"),
    "injected": ("Memories given to replies", "提供给回复的记忆"),
    "archived": ("Messages archived", "存档的消息"),
    "chart_note": (
        "Turns and facts count the memories still kept, by the day they were stored. Recalls are added by each "
        "call when it ends.",
        "轮次与事实按存入日期统计仍保存的记忆。检索次数在每次通话结束时记入。",
    ),
    "totals": ("Totals", "总计"),
}


def pick_lang(query: str | None, cookie: str | None, accept: str | None) -> str:
    """`?lang=` if it names one, else the cookie's, else Chinese for a browser that asks
    for it first, else English."""
    for value in (query, cookie):
        if value in LANGS:
            return value
    first = (accept or "").split(",")[0].strip().lower()
    return "zh" if first.startswith("zh") else "en"


def category_name(lang: str, category: str) -> str:
    """A durable category's name in `lang`; one the settings added shows as it is."""
    words = WORDS.get(f"category:{category}")
    return words[LANGS.index(lang) if lang in LANGS else 0] if words else category


def translator(lang: str) -> Callable[..., str]:
    """`t(key, **fields)` in `lang`; an unknown key shows as itself (a test finds it)."""
    index = LANGS.index(lang) if lang in LANGS else 0

    def t(key: str, **fields: object) -> str:
        words = WORDS.get(key)
        text = words[index] if words else key
        return text.format(**fields) if fields else text

    return t
