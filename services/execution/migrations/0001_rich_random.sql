CREATE TABLE "execution"."webhook_deliveries" (
	"id" text PRIMARY KEY NOT NULL,
	"task_id" text NOT NULL,
	"project_id" text NOT NULL,
	"webhook_index" integer NOT NULL,
	"url" text NOT NULL,
	"secret_ref" text NOT NULL,
	"event_type" text NOT NULL,
	"payload" text NOT NULL,
	"status" text DEFAULT 'pending' NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"next_attempt_at" timestamp with time zone DEFAULT now() NOT NULL,
	"last_attempt_at" timestamp with time zone,
	"last_status_code" integer,
	"last_error" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"finished_at" timestamp with time zone
);
--> statement-breakpoint
ALTER TABLE "execution"."webhook_deliveries" ADD CONSTRAINT "webhook_deliveries_task_id_tasks_id_fk" FOREIGN KEY ("task_id") REFERENCES "execution"."tasks"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "webhook_deliveries_task" ON "execution"."webhook_deliveries" USING btree ("task_id","created_at");--> statement-breakpoint
CREATE INDEX "webhook_deliveries_due" ON "execution"."webhook_deliveries" USING btree ("next_attempt_at") WHERE status = 'pending';